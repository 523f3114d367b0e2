"""What ``SAM2_PRECISION`` means on each device and CPU (the CPU's features stood in for)."""

from __future__ import annotations

import pytest
import torch

from segmentation.engines.sam2.precision import precision_choose


@pytest.fixture
def cpu_features(monkeypatch: pytest.MonkeyPatch):
    def set_features(*, amx: bool, avx512_bf16: bool) -> None:
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)

    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    return set_features


@pytest.mark.parametrize(
    ("amx", "avx512_bf16", "expected"),
    [
        (True, True, torch.bfloat16),
        (False, True, torch.bfloat16),
        (True, False, torch.bfloat16),
        (False, False, torch.float32),
    ],
)
def test_auto_on_a_cpu_is_bfloat16_where_it_is_native(
    cpu_features, amx: bool, avx512_bf16: bool, expected: torch.dtype
) -> None:
    cpu_features(amx=amx, avx512_bf16=avx512_bf16)

    assert precision_choose("auto", torch.device("cpu")) == expected


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        ("AVX2", torch.float32),
        ("avx512_core", torch.float32),
        ("AVX512_CORE_BF16", torch.bfloat16),
        ("AVX512_CORE_AMX", torch.bfloat16),
        ("not-an-isa", torch.bfloat16),
    ],
)
def test_auto_follows_a_limit_put_on_onednn(
    cpu_features, monkeypatch: pytest.MonkeyPatch, limit: str, expected: torch.dtype
) -> None:
    cpu_features(amx=True, avx512_bf16=True)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", limit)

    assert precision_choose("auto", torch.device("cpu")) == expected


def test_auto_on_other_devices_and_explicit_choices(cpu_features) -> None:
    cpu_features(amx=False, avx512_bf16=False)

    assert precision_choose("auto", torch.device("cuda", 1)) == torch.bfloat16
    assert precision_choose("auto", torch.device("mps")) == torch.float32
    assert precision_choose("bfloat16", torch.device("cpu")) == torch.bfloat16
    assert precision_choose("float32", torch.device("cuda")) == torch.float32


def test_an_unknown_precision_is_refused() -> None:
    message = "precision must be one of auto, float32, bfloat16, got 'half'"
    with pytest.raises(ValueError, match=message) as error:
        precision_choose("half", torch.device("cpu"))

    assert str(error.value) == message
