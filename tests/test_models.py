from __future__ import annotations

import pytest

import teamgraph
from teamgraph import ModelConfigError, Settings
from teamgraph.llm.offline import OfflineChatModel
from teamgraph.llm.pricing import Price, PriceTable
from teamgraph.llm.provider_errors import is_transient
from teamgraph.llm.resolve import resolve_model


def test_offline_is_the_default_model() -> None:
    assert isinstance(resolve_model(Settings().default_model), OfflineChatModel)
    assert resolve_model("offline", latency=0.5).latency == 0.5  # type: ignore[attr-defined]


def test_missing_provider_package_gives_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(  # as on a machine without the anthropic extra
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "langchain_anthropic" else find_spec(name, *a),
    )
    with pytest.raises(ModelConfigError) as info:
        resolve_model("anthropic:claude-sonnet-4-5")
    assert 'pip install "teamgraph[anthropic]"' in str(info.value)


def test_unknown_provider_and_malformed_names() -> None:
    with pytest.raises(ModelConfigError, match="unknown provider 'mystery'"):
        resolve_model("mystery:model")
    with pytest.raises(ModelConfigError, match="expected 'provider:model'"):
        resolve_model("gpt-4o")


@pytest.mark.allow_model_construction
def test_openai_compatible_endpoint_from_settings() -> None:
    settings = Settings(openai_base_url="http://127.0.0.1:9999/v1", openai_api_key="sk-test")
    model = resolve_model("openai:my-local-model", settings)
    assert model.openai_api_base == "http://127.0.0.1:9999/v1"  # type: ignore[attr-defined]
    assert model.model_name == "my-local-model"  # type: ignore[attr-defined]


def test_real_model_clients_are_blocked_in_tests() -> None:
    with pytest.raises(RuntimeError, match="must not build real model clients"):
        resolve_model("openai:gpt-4o-mini", Settings(openai_api_key="sk-test"))


def test_prices() -> None:
    table = PriceTable()
    assert table.cost("offline", 10**6, 10**6) == 0
    assert table.cost("openai:gpt-4o-mini", 10**6, 10**6) == pytest.approx(0.75)
    assert table.cost("gpt-4o-mini", 10**6, 0) == pytest.approx(0.15)  # bare name
    assert table.cost("ollama:llama3.1", 10**6, 10**6) == 0
    assert table.price("unknown:model") is None
    assert Price(1, 2).cost(500_000, 250_000) == pytest.approx(1.0)


def test_price_file_overrides(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "prices.yaml"
    path.write_text("mine:model: {input_per_mtok: 2, output_per_mtok: 4}\n")
    assert PriceTable.load(path).cost("mine:model", 10**6, 10**6) == pytest.approx(6)
    path.write_text("mine:model: {input_per_mtok: cheap}\n")
    with pytest.raises(teamgraph.SpecError, match="mine:model"):
        PriceTable.load(path)


class _Status(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"HTTP {code}")
        self.status_code = code


def test_transient_classification() -> None:
    assert is_transient(TimeoutError())
    assert is_transient(ConnectionResetError())
    assert is_transient(_Status(429)) and is_transient(_Status(503))
    assert not is_transient(_Status(400)) and not is_transient(ValueError("bad"))


def test_public_surface_imports_and_exports_every_exception() -> None:
    for name in teamgraph.__all__:
        assert getattr(teamgraph, name) is not None
    exported = {getattr(teamgraph, n) for n in teamgraph.__all__}
    for obj in vars(teamgraph.errors).values():
        if isinstance(obj, type) and issubclass(obj, teamgraph.TeamgraphError):
            assert obj in exported, obj.__name__


def test_settings_never_show_keys_or_secrets() -> None:
    """A logged or printed Settings (an error report, a debug line) leaks no key."""
    shown = repr(
        Settings(
            openai_api_key="sk-openai-secret",
            anthropic_api_key="sk-ant-secret",
            jwt_secret="jwt-secret-value-long-enough",
            master_password="Master-secret",
            providers={"openai": {"api_key": "sk-provider-secret"}},
        )
    )
    assert "secret" not in shown
