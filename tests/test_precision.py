"""embedder.precision: native-bf16 detection, auto/bf16/fp32 resolution, the cache key, the run
fingerprint and run.json; with the real MiniLM (slow): bf16 vectors within cosine 0.9999 of fp32, and queries by an
fp32 twin (embedder.query_precision)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from omegaconf import OmegaConf

import gear_repro.embedding.precision as P
from gear_repro.embedding import SentenceEmbedder
from gear_repro.embedding.precision import Precision, cpu_flags, native_bf16, resolve_precision
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.resume import run_fingerprint
from gear_repro.pipeline.runner import Runner
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.io import read_json
from tests.helpers.cpus import EPYC, GRAVITON, SKYLAKE
from tests.helpers.doubles import HashEmbedder
from tests.helpers.requirements import missing


@pytest.mark.usefixtures("no_isa_cap")
def test_cpu_flags_and_native_bf16() -> None:
    assert {"avx512_bf16", "avx512f"} <= cpu_flags(EPYC) and "bf16" in cpu_flags(GRAVITON)
    assert native_bf16("cpu", EPYC) == (True, "CPU flags avx512_bf16")
    assert native_bf16("cpu", GRAVITON)[0] and not native_bf16("cpu", SKYLAKE)[0]
    assert not native_bf16("cpu", "")[0]  # nothing readable: no
    assert native_bf16("mps", EPYC) == (False, "no bf16 detection for device 'mps'")


@pytest.mark.usefixtures("no_isa_cap")
@pytest.mark.parametrize("value, cpu, backend, used", [
    ("fp32", EPYC, "torch", "fp32"), ("auto", EPYC, "torch", "bf16"), ("bf16", EPYC, "torch", "bf16"),
    ("auto", SKYLAKE, "torch", "fp32"), ("fp32", SKYLAKE, "torch", "fp32"), ("auto", GRAVITON, "torch", "bf16"),
    ("auto", EPYC, "onnx", "fp32"), (Precision.auto, EPYC, "torch", "bf16"),
    ("auto", EPYC, "openvino", "bf16"), ("auto", SKYLAKE, "openvino", "fp32"), ("bf16", EPYC, "openvino", "bf16"),
])
def test_resolve_precision(value, cpu, backend, used) -> None:
    assert resolve_precision(value, "cpu", backend, cpuinfo=cpu) is Precision(used)


@pytest.mark.usefixtures("no_isa_cap")
@pytest.mark.parametrize("value, cpu, backend, msg", [
    ("bf16", SKYLAKE, "torch", "no native bf16 .* emulation, slower than fp32"),  # never a silent slow-down
    ("bf16", EPYC, "onnx", "needs embedder.backend=torch or openvino"),
    ("bf16", SKYLAKE, "openvino", "no native bf16"),
    ("half", EPYC, "torch", r"embedder.precision must be one of \['fp32', 'bf16', 'auto', 'fp16'\]"),
    ("fp16", EPYC, "torch", "fp16 runs with embedder.backend=torch on a CUDA device .* device 'cpu'"),
])
def test_bf16_refused_where_it_would_not_run_natively(value, cpu, backend, msg) -> None:
    with pytest.raises(ConfigError, match=msg):
        resolve_precision(value, "cpu", backend, cpuinfo=cpu)


def test_fp16_and_device_auto_on_cuda(monkeypatch) -> None:
    """fp16 is accepted on a CUDA device with torch only; ``auto`` names the CUDA device where torch sees one."""
    import torch

    assert resolve_precision("fp16", "cuda", "torch") is Precision.fp16
    assert resolve_precision("fp16", "cuda:1", "torch") is Precision.fp16
    with pytest.raises(ConfigError, match="backend 'onnx', device 'cuda'"):
        resolve_precision("fp16", "cuda", "onnx")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert P.resolve_device("auto") == "cpu" and P.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(ConfigError, match="device 'cpu'"):
        resolve_precision("fp16", "auto", "torch")  # auto without a GPU is the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert P.resolve_device("auto") == "cuda"
    assert resolve_precision("fp16", "auto", "torch") is Precision.fp16


def test_precision_in_every_cache_key_fp32_key_unchanged(cpu, caplog) -> None:
    cpu(EPYC)
    with caplog.at_level("INFO", logger="gear_repro.embedding.embedder"):
        ids = {p: SentenceEmbedder("all-MiniLM-L6-v2", precision=p).model_id for p in ("fp32", "bf16", "auto")}
    # fp32 keeps the key that corpus/path caches and index names were written under before the setting existed
    assert ids["fp32"] == hash_obj({"model": "all-MiniLM-L6-v2", "normalize": True, "max_seq_length": None}, 12)
    assert ids["bf16"] != ids["fp32"] and ids["auto"] == ids["bf16"]  # auto keyed by what runs
    # sessions 9-13 ran mpnet's attention eagerly under bf16: their vectors are not read as the fused ones'
    eager = {"model": "all-MiniLM-L6-v2", "normalize": True, "max_seq_length": None, "precision": "bf16",
             "bf16_linears": "packed"}
    assert ids["bf16"] != hash_obj(eager, 12)
    # bf16 with packed linear layers and bf16 by autocast alone (a torch without the oneDNN ops) differ in the last
    # bits, so they never share a cache entry
    from gear_repro.embedding import bf16 as B

    packed = B.packing_available("cpu")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(B, "packing_available", lambda device: not packed)
        assert SentenceEmbedder("all-MiniLM-L6-v2", precision="bf16").model_id not in (ids["bf16"], ids["fp32"])
    # a transformers whose mpnet attention is called otherwise (4.x: a head mask third) keeps it eager, under its
    # own key
    assert B.mpnet_attention_fusable()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(B, "mpnet_attention_fusable", lambda: False)
        eager_emb = SentenceEmbedder("all-MiniLM-L6-v2", precision="bf16")
        assert eager_emb.model_id not in (ids["bf16"], ids["fp32"]) and not eager_emb._fuse_mpnet
    assert [r.getMessage() for r in caplog.records] == ["embedder.precision=auto: running bf16 on cpu (CPU flags avx512_bf16)"]
    cpu(SKYLAKE)
    emb = SentenceEmbedder("all-MiniLM-L6-v2", precision="auto")
    assert emb.model_id == ids["fp32"]
    assert emb.describe() == {"model": "all-MiniLM-L6-v2", "backend": "torch", "device": "cpu", "precision": "auto",
                              "precision_used": "fp32", "query_precision": "fp32", "query_precision_used": "fp32",
                              "model_id": ids["fp32"]}
    assert emb.queries is emb  # fp32: no twin
    with pytest.raises(ConfigError, match="emulation"):
        SentenceEmbedder("all-MiniLM-L6-v2", precision="bf16")


def test_fingerprint_uses_the_precision_that_runs(compose, cpu) -> None:
    cpu(EPYC)
    fp32, bf16, auto = (run_fingerprint(compose(["embedder=minilm", f"embedder.precision={p}"]))
                        for p in ("fp32", "bf16", "auto"))
    without = OmegaConf.create(OmegaConf.to_container(compose(["embedder=minilm"])))
    del without.embedder["precision"]  # a config written before the setting existed
    assert fp32 == run_fingerprint(without)  # run dirs from before the setting still resume
    assert bf16 == auto != fp32
    # query_precision: no effect at fp32; at bf16 `same` is how bf16 ran before the setting existed
    same = [f"embedder.precision={p}" for p in ("fp32", "bf16")]
    fp32_same, bf16_same = (run_fingerprint(compose(["embedder=minilm", o, "embedder.query_precision=same"])) for o in same)
    old_bf16 = OmegaConf.create(OmegaConf.to_container(compose(["embedder=minilm", "embedder.precision=bf16"])))
    del old_bf16.embedder["query_precision"]
    assert fp32_same == fp32 and bf16_same == run_fingerprint(old_bf16) != bf16
    # OpenVINO: the precision it runs is in the fingerprint at fp32 too (an unpinned "fp32" ran bf16 here)
    ov = [run_fingerprint(compose(["embedder=minilm", "embedder.backend=openvino", f"embedder.precision={p}"]))
          for p in ("fp32", "bf16")]
    old_ov = OmegaConf.create(OmegaConf.to_container(compose(["embedder=minilm", "embedder.backend=openvino"])))
    del old_ov.embedder["precision"]
    assert len({*ov, fp32}) == 3 and ov[0] == run_fingerprint(old_ov)
    cpu(SKYLAKE)  # the same `auto` config on a CPU without bf16 runs fp32: another fingerprint
    assert run_fingerprint(compose(["embedder=minilm", "embedder.precision=auto"])) == fp32


def test_fingerprint_uses_the_device_auto_resolved_to(compose, monkeypatch) -> None:
    """``embedder.device=auto`` resumes where it ran on the same device only: a GPU's vectors differ from a CPU's."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu_fp = run_fingerprint(compose(["embedder=minilm"]))
    assert run_fingerprint(compose(["embedder=minilm", "embedder.device=auto"])) == cpu_fp
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run_fingerprint(compose(["embedder=minilm", "embedder.device=auto"])) == \
        run_fingerprint(compose(["embedder=minilm", "embedder.device=cuda"])) != cpu_fp


def test_bad_precision_fails_at_composition(compose) -> None:
    with pytest.raises(Exception, match="half"):
        compose(["embedder=minilm", "embedder.precision=half"])


def test_run_json_records_the_precision(compose, toy_dir, tmp_path) -> None:
    cfg = compose([f"dataset.path={toy_dir}", "dataset.name=toy", "run.progress=false", "retriever=sbert",
                   "embedder=minilm"])
    emb = HashEmbedder()
    Runner(cfg, tmp_path / "run", resources=Resources(cfg, embedder=emb)).run()
    rec = read_json(tmp_path / "run" / "run.json")["embedder"]
    assert rec == {"model": "hash-64", "backend": "torch", "device": "cpu", "precision": "fp32", "precision_used": "fp32",
                   "query_precision": "fp32", "query_precision_used": "fp32", "model_id": emb.model_id}


@pytest.mark.slow
def test_bf16_vectors_agree_with_fp32() -> None:
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    if not native_bf16("cpu")[0]:
        pytest.skip("this CPU has no native bf16 (embedder.precision=bf16 is refused here)")
    texts = ["Who is the spouse of the Green performer?", "Marie Curie won Nobel Prize in Physics",
             "The Mekong river flows through six countries of Southeast Asia before reaching the South China Sea"]
    f32, b16 = (SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, precision=p)
                for p in ("fp32", "bf16"))
    import torch

    from gear_repro.embedding.bf16 import PackedLinear

    # bf16 packs every linear layer's bf16 weight once at load; the other weights and the fp32 model stay float32
    assert not any(isinstance(m, torch.nn.Linear) for m in b16.model.modules())
    assert sum(isinstance(m, PackedLinear) for m in b16.model.modules()) == 6 * 6 + 1  # 6 layers x 6, the pooler
    assert {p.dtype for p in b16.model.parameters()} == {torch.float32} == {p.dtype for p in f32.model.parameters()}
    assert not any(isinstance(m, PackedLinear) for m in f32.model.modules())
    a, b = f32.encode_corpus(texts), b16.encode_corpus(texts)
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-6)
    cos = (a * b).sum(axis=1)
    assert cos.min() >= 0.9999 and not np.array_equal(a, b)  # bf16 really ran, and agrees
    paths = texts[1:] * 2
    assert ((f32.encode_fixed(paths, 4) * b16.encode_fixed(paths, 4)).sum(axis=1) >= 0.9999).all()
    # GRIEVER's token vectors run in the embedder's precision as well
    from gear_repro.methods.griever.matcher import SentenceTokenEncoder
    from gear_repro.methods.griever.text import words

    (s32, t32, _), (s16, t16, _) = (SentenceTokenEncoder(e).encode_tokens(texts[1], words(texts[1])) for e in (f32, b16))
    assert t16.dtype == np.float32 and float(s32 @ s16) >= 0.9999 and not np.array_equal(t32, t16)
    # the query side (embedder.query_precision=fp32, the default): an fp32 twin, loaded on the first query, whose
    # vectors are the fp32 embedder's to the bit; the bulk encodes stay bf16
    assert b16.queries is not b16 and b16.queries._model is None and b16.queries.model_id == f32.model_id
    assert np.array_equal(b16.encode(texts), f32.encode(texts))
    assert b16.queries._model is not None and not np.array_equal(b16.encode_alone(texts), f32.encode(texts))
    assert b16.describe()["query_precision_used"] == "fp32" and b16.describe()["query_stats"]["encoded"] == 3
    same = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, precision="bf16",
                            query_precision="same")
    assert same.queries is same and np.array_equal(same.encode(texts), b16.encode_alone(texts))
    # GRIEVER's query tokens go through the query side too
    from gear_repro.methods.griever.retriever import GrieverRetriever

    for emb, want in ((b16, t32), (same, t16)):
        matcher = GrieverRetriever(None, emb, [], None, None).matcher
        assert np.array_equal(matcher.encoder.encode_tokens(texts[1], words(texts[1]))[1], want)


def test_pack_linears_computes_what_autocast_linear_does() -> None:
    import torch

    from gear_repro.embedding.bf16 import PackedLinear, pack_linears, packing_available

    if not native_bf16("cpu")[0] or not packing_available("cpu"):
        pytest.skip("needs native bf16 and torch's oneDNN linear ops (the embedder packs only there)")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 16, bias=False))
    model = pack_linears(copy.deepcopy(ref))
    assert [type(m) for m in model] == [PackedLinear, torch.nn.LayerNorm, PackedLinear]
    assert model[1].weight.dtype == torch.float32 and model[2].bias_ is None  # only linear layers change
    x = torch.randn(3, 5, 64)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        want = ref(x).float()  # autocast: bf16 linear layers, the layer norm in float32
        got = model.to("cpu")(x)  # .to() leaves the packed weights alone
    assert got.dtype == torch.bfloat16 and got.shape == (3, 5, 16)
    assert torch.allclose(got.float(), want, atol=0.02) and want.abs().max() > 0.5


def test_fused_mpnet_attention_is_mpnets_attention() -> None:
    """fuse_mpnet_attention (bf16 runs): the function of transformers' eager mpnet attention (position bias and
    padding mask included), close to it under bf16, and a text's vector independent of the rows padded beside it."""
    import torch
    from transformers import MPNetConfig, MPNetModel

    from gear_repro.embedding.bf16 import AdditiveMask, MpnetSdpaAttention, fuse_mpnet_attention

    torch.manual_seed(0)
    cfg = MPNetConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, attn_implementation="eager")
    ref = MPNetModel(cfg).eval()
    fused = fuse_mpnet_attention(copy.deepcopy(ref))
    fused_layers = [m for m in fused.modules() if isinstance(m, MpnetSdpaAttention)]
    assert len(fused_layers) == 2 and fused_layers[0].mask is fused_layers[1].mask
    ids = torch.randint(3, 100, (3, 40))
    mask = torch.ones_like(ids)
    mask[1, 25:], mask[2, 6:] = 0, 0
    real = mask.bool()
    with torch.inference_mode():
        want = ref(input_ids=ids, attention_mask=mask).last_hidden_state
        got = fused(input_ids=ids, attention_mask=mask).last_hidden_state
        unpadded = fused(input_ids=ids[:1]).last_hidden_state  # no padding mask at all: the bias alone
    assert torch.allclose(got[real], want[real], atol=1e-5) and want[real].abs().max() > 1
    assert torch.allclose(unpadded[0], want[0], atol=1e-5)
    assert fused_layers[0].mask._kept is None  # the batch's mask dropped when the pass ended
    bias, keep = torch.randn(1, 2, 3, 3), torch.tensor([True, True, False]).view(1, 1, 1, 3)
    kept = AdditiveMask()
    as_bool = kept(bias, keep, torch.float32)  # a boolean padding mask (True = attend) as its additive form
    assert torch.equal(as_bool, bias + torch.tensor([0.0, 0.0, float("-inf")]))
    assert kept(bias, keep, torch.float32) is as_bool and kept(bias.clone(), keep, torch.float32) is not as_bool
    if not native_bf16("cpu")[0]:
        return
    others = ids.clone()
    others[[0, 2]] = torch.randint(3, 100, (2, 40))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        b16 = fused(input_ids=ids, attention_mask=mask).last_hidden_state
        beside_others = fused(input_ids=others[[2, 1, 0]], attention_mask=mask).last_hidden_state
    assert torch.allclose(b16[real].float(), want[real], atol=0.02)
    assert torch.equal(b16[1], beside_others[1])  # same row, other companions, same padded shape: same bits


@pytest.mark.slow
def test_a_half_precision_checkpoint_runs_in_the_precision_asked_for(tmp_path) -> None:
    """transformers loads weights in the dtype they were saved in; embedder.precision=fp32 must still compute in
    float32 (the GPU bundle carries MiniLM in float16: benchmarks/bench_gpu.py), and give the fp32 checkpoint's
    vectors up to the weights' rounding."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from gear_repro.embedding.sbert_weights import resolve_model

    src = resolve_model("all-MiniLM-L6-v2")
    if src == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    half = tmp_path / "minilm16"
    shutil.copytree(src, half, ignore=shutil.ignore_patterns("model.safetensors", "README.md", "*.onnx", "onnx",
                                                                  "openvino"))
    save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(f"{src}/model.safetensors").items()},
              str(half / "model.safetensors"))
    emb16 = SentenceEmbedder(str(half), cache=False, show_progress=False)
    assert {p.dtype for p in emb16.model.parameters()} == {torch.float32}
    texts = ["Marie Curie won Nobel Prize in Physics", "Who is the spouse of the Green performer?"]
    cos = (emb16.encode_corpus(texts) * SentenceEmbedder(src, cache=False, show_progress=False).encode_corpus(texts))
    assert cos.sum(axis=1).min() > 0.9999


@pytest.mark.parametrize(("cap", "native"), [("AVX2", False), ("avx512_core", False), ("AVX512_CORE_AMX", True),
                                             ("", True)])
def test_a_onednn_isa_cap_below_bf16_means_no_native_bf16(cpu, monkeypatch, cap, native) -> None:
    """ONEDNN_MAX_CPU_ISA=AVX2 (how an AVX-512 machine runs an AVX2-only CPU's kernels) makes torch's bf16 linears
    fail whatever /proc/cpuinfo says: bf16 then counts as not native (auto -> fp32, bf16 refused)."""
    cpu(EPYC)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    ok, why = native_bf16("cpu")
    assert ok is native
    assert ("ONEDNN_MAX_CPU_ISA" in why) is not native
    assert resolve_precision("auto", "cpu", "torch") is (Precision.bf16 if native else Precision.fp32)
