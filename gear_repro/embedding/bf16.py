"""``embedder.precision=bf16`` (issue 25): the encoder's linear layers converted to bfloat16 once, at load.

Under ``torch.autocast`` alone, every ``nn.Linear`` casts its float32 weight to bf16 (once per autocast region,
so once per text when texts are encoded one at a time) and oneDNN reorders it into its blocked layout on every
call. :func:`pack_linears` does both once; everything else (embeddings, layer norms, the residual stream, mpnet's
position bias) keeps float32 weights and runs under autocast as before, so vectors agree with fp32 as closely as
autocast's (docs/encoders.md has the measurements, and those of converting the whole model to bf16).
"""

from __future__ import annotations

import torch
from torch import nn

PACK_ROWS = 4096  # oneDNN's hint of the rows (tokens per batch) a packed weight will meet; any count runs


class PackedLinear(nn.Module):
    """An ``nn.Linear`` in bf16, its weight reordered once into oneDNN's blocked layout (CPU); input cast to bf16,
    output bf16 (what the linear layer gives under autocast)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # plain attributes, not parameters: module.to() must not touch the oneDNN tensor
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().to(torch.bfloat16), PACK_ROWS)
        self.bias_ = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self.packed, self.bias_, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bf16 oneDNN-packed"


def packing_available(device: str) -> bool:
    """Whether :func:`pack_linears` packs on ``device``: a CPU whose torch has oneDNN and the two (private) oneDNN
    ops it uses; a torch build without them leaves the model to autocast alone (the embedding cache key says
    which ran: :attr:`~gear_repro.embedding.embedder.SentenceEmbedder.model_id`)."""
    if device != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    try:
        return all(hasattr(torch.ops.mkldnn, op) for op in ("_reorder_linear_weight", "_linear_pointwise"))
    except (AttributeError, RuntimeError):
        return False


def pack_linears(model: nn.Module) -> nn.Module:
    """Every ``nn.Linear`` of ``model`` replaced in place by a :class:`PackedLinear` (the caller checks
    :func:`packing_available` first). Returns ``model``."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, PackedLinear(child))
    return model
