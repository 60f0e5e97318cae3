"""``embedder.precision=bf16`` (issue 25): the encoder converted to bfloat16 once, when it is loaded.

Measured against ``torch.autocast`` on this project's CPU (docs/encoders.md): autocast re-casts activations
between its bf16 matrix products and the layers it keeps in float32 (layer norms, softmax, mpnet's position bias),
and a plain bf16 ``F.linear`` reorders its weight into oneDNN's blocked layout on every call. Converting the module
once and packing every linear weight once removes both.
"""

from __future__ import annotations

import torch
from torch import nn

PACK_ROWS = 4096  # oneDNN's hint of the rows (tokens per batch) a packed weight will meet; any count runs


class PackedLinear(nn.Module):
    """An ``nn.Linear`` whose bf16 weight is reordered once into oneDNN's blocked layout (CPU)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # plain attributes, not parameters: module.to() must not touch the oneDNN tensor
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACK_ROWS)
        self.bias_ = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias_, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bf16 oneDNN-packed"


def to_bf16(model: nn.Module, device: str = "cpu") -> nn.Module:
    """``model`` converted in place to bfloat16 (every parameter and buffer), then, on a CPU whose torch has
    oneDNN, every ``nn.Linear`` replaced by a :class:`PackedLinear`. Returns ``model``."""
    model.to(torch.bfloat16)
    if device == "cpu" and torch.backends.mkldnn.is_available():
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, PackedLinear(child))
    return model
