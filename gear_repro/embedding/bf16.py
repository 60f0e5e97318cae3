"""``embedder.precision=bf16``: the encoder's linear layers converted to bfloat16 once, at load.

Under ``torch.autocast`` alone, every ``nn.Linear`` casts its float32 weight to bf16 (once per autocast region,
so once per text when texts are encoded one at a time) and oneDNN reorders it into its blocked layout on every
call. :func:`pack_linears` does both once; everything else (embeddings, layer norms, the residual stream, mpnet's
position bias) keeps float32 weights and runs under autocast as before, so vectors agree with fp32 as closely as
autocast's (docs/encoders.md has the measurements, and those of converting the whole model to bf16).

mpnet's attention is eager in transformers (its relative position bias is added to the scores), and under autocast
the float32 bias and mask turn the L x L scores into float32 and back in every layer. :func:`fuse_mpnet_attention`
runs it as one ``scaled_dot_product_attention`` call with bias and mask as the additive mask (the same function;
products accumulated in float32 inside the kernel).
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
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


class AdditiveMask:
    """mpnet's relative position bias plus the padding mask, in the attention's dtype, made once per forward pass:
    every layer receives the same two tensors (``MPNetEncoder.forward``), so the sum is kept for the next layer,
    and dropped by :meth:`release` when the encoder's forward pass ends (a batch's masks reach hundreds of MB)."""

    def __init__(self) -> None:
        # (bias, padding, dtype, their sum): one attribute, read once per call, so a reader never pairs one
        # batch's key with another's sum
        self._kept: tuple[torch.Tensor | None, torch.Tensor | None, torch.dtype, torch.Tensor | None] | None = None

    def release(self, *hook_args: object) -> None:
        """Forget the kept tensors (a forward hook of the encoder)."""
        self._kept = None

    def __call__(self, bias: torch.Tensor | None, padding: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
        kept = self._kept
        if kept is not None and kept[0] is bias and kept[1] is padding and kept[2] == dtype:
            return kept[3]
        additive = padding
        if padding is not None and padding.dtype == torch.bool:  # True = attend
            additive = torch.zeros(padding.shape, device=padding.device).masked_fill(~padding, float("-inf"))
        total = bias if additive is None else additive if bias is None else bias + additive
        kept = (bias, padding, dtype, None if total is None else total.to(dtype))
        self._kept = kept
        return kept[3]


class MpnetSdpaAttention(nn.Module):
    """transformers' ``MPNetSelfAttention`` (softmax(q k^T / sqrt(d) + position bias + padding mask) v, then the
    output projection) as one ``F.scaled_dot_product_attention`` call; the same q/k/v/o layers (packed or not)."""

    def __init__(self, attn: nn.Module, mask: AdditiveMask) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = attn.q, attn.k, attn.v, attn.o
        self.heads, self.head_size = attn.num_attention_heads, attn.attention_head_size
        self.mask = mask

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_bias: torch.Tensor | None = None, output_attentions: bool = False,
                **kwargs: object) -> tuple[torch.Tensor]:
        if output_attentions:
            raise ValueError("the fused mpnet attention (embedder.precision=bf16) does not return attention weights")
        shape = (*hidden_states.shape[:-1], self.heads, self.head_size)
        q, k, v = (lin(hidden_states).view(shape).transpose(1, 2) for lin in (self.q, self.k, self.v))
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(position_bias, attention_mask, q.dtype))
        return (self.o(c.transpose(1, 2).reshape(*hidden_states.shape[:-1], self.heads * self.head_size)),)


MPNET_ATTENTION_CALL = ("self", "hidden_states", "attention_mask", "position_bias")


def mpnet_attention_fusable() -> bool:
    """Whether the installed transformers calls mpnet's self-attention as :class:`MpnetSdpaAttention` expects
    (``hidden_states, attention_mask, position_bias``: transformers 5; 4.x passes a head mask third, which would
    arrive as the position bias). Where it does not, mpnet's attention stays eager (and the cache key says so)."""
    try:
        from transformers.models.mpnet.modeling_mpnet import MPNetSelfAttention
    except ImportError:
        return False
    return tuple(inspect.signature(MPNetSelfAttention.forward).parameters)[:4] == MPNET_ATTENTION_CALL


def fuse_mpnet_attention(model: nn.Module) -> nn.Module:
    """The self-attention of every mpnet encoder layer in ``model`` replaced in place by a
    :class:`MpnetSdpaAttention`, one :class:`AdditiveMask` per encoder, released by a forward hook when the
    encoder's pass ends; other architectures are left as they are (the caller checks
    :func:`mpnet_attention_fusable` first). Returns ``model``."""
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    if not mpnet_attention_fusable():
        raise RuntimeError("this transformers calls mpnet's attention with other arguments than "
                           f"{MPNET_ATTENTION_CALL[1:]}: the fused attention would misread them")

    for encoder in [m for m in model.modules() if isinstance(m, MPNetEncoder)]:
        mask = AdditiveMask()
        for layer in encoder.layer:
            layer.attention.attn = MpnetSdpaAttention(layer.attention.attn, mask)
        encoder.register_forward_hook(mask.release)
    return model
