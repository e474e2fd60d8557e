"""The supervisor's warm-up of the SDK (`model.warm_up`, run once before it forks): the TLS
context it builds is the one every teammate's client uses, so no teammate loads the CA
bundle again on its way to its first request (45-90 ms each, bench/bench_spawn.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from teamd.agent import model


@pytest.fixture
def warmed() -> Iterator[None]:
    before = model._TLS_CONTEXT
    model.warm_up()
    yield
    model._TLS_CONTEXT = before


def pool_context(client: model.Client) -> object:
    return client.sdk._client._transport._pool._ssl_context  # type: ignore[attr-defined]


def test_clients_made_after_the_warm_up_share_its_tls_context(warmed: None) -> None:
    assert model._TLS_CONTEXT is not None
    first, second = model.make_client(5), model.make_client(5)
    assert pool_context(first) is model._TLS_CONTEXT
    assert pool_context(second) is model._TLS_CONTEXT


def test_without_a_warm_up_each_client_builds_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_TLS_CONTEXT", None)
    first, second = model.make_client(5), model.make_client(5)
    assert pool_context(first) is not pool_context(second)
