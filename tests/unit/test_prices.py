"""The price table (teamd/prices.toml) and its arithmetic, `[prices]` in teamd.toml (its bad
keys are refused in test_cost.py) and `teamctl prices` (CONTRACT.md sections 9 and 12),
against hand-computed figures."""

from __future__ import annotations

import json

import pytest

from teamd import deprecations, prices, settings
from teamd.layout import Workspace
from tests.harness import cli

# 1,000 uncached in, 2,000 out, 10,000 written to the cache (4,000 of them for 1 hour),
# 100,000 read from it
SPLIT = {"input_tokens": 1_000, "output_tokens": 2_000, "cache_creation_input_tokens": 10_000,
         "cache_creation_1h": 4_000, "cache_read_input_tokens": 100_000}


def cost(model: str, usage: dict[str, int], table: dict[str, prices.Price] | None = None
         ) -> float | None:
    return prices.cost(usage, prices.price_of(model, table))


def test_a_0_1x_cache_read_and_a_1_hour_write_sonnet_4_6() -> None:
    # $3 in, $15 out, 5-minute write $3.75, 1-hour write $6, read $0.30 (0.1 ×):
    #   1,000 × 3 + 6,000 × 3.75 + 4,000 × 6 + 100,000 × 0.30 + 2,000 × 15
    #   = 3,000 + 22,500 + 24,000 + 30,000 + 30,000 = 109,500 micro-dollars
    assert cost("claude-sonnet-4-6", SPLIT) == pytest.approx(0.1095, abs=1e-12)


def test_a_0_05x_cache_read_opus_5_5() -> None:
    # $4, $20, $5, $8, read $0.20 (0.05 ×): 4,000 + 30,000 + 32,000 + 20,000 + 40,000
    assert cost("claude-opus-5-5", SPLIT) == pytest.approx(0.126, abs=1e-12)


def test_a_0_025x_cache_read_fable_and_mythos_5_1() -> None:
    # $10, $50, $12.50, $20, read $0.25 (0.025 ×): 10,000 + 75,000 + 80,000 + 25,000 + 100,000
    assert cost("claude-fable-5-1", SPLIT) == pytest.approx(0.29, abs=1e-12)
    assert cost("claude-mythos-5-1", SPLIT) == cost("claude-fable-5-1", SPLIT)
    # Fable 5 reads at $1 (0.1 ×): 100,000 × 1 instead of × 0.25 → $0.075 more
    assert cost("claude-fable-5", SPLIT) == pytest.approx(0.365, abs=1e-12)


def test_a_bare_cache_creation_is_priced_as_5_minute_writes() -> None:
    bare = {k: v for k, v in SPLIT.items() if k != prices.ONE_HOUR}
    # Sonnet 5.5: $2, $10, $2.50 5-minute write, read $0.10 (0.05 × since 2026-10-07)
    #   1,000 × 2 + 10,000 × 2.5 + 100,000 × 0.1 + 2,000 × 10 = 2,000 + 25,000 + 10,000 + 20,000
    assert cost("claude-sonnet-5-5", bare) == pytest.approx(0.057, abs=1e-12)
    # the same call with 4,000 of the writes for 1 hour: + 4,000 × (4 - 2.5) = + 6,000
    assert cost("claude-sonnet-5-5", SPLIT) == pytest.approx(0.063, abs=1e-12)
    assert cost("claude-sonnet-5-5", {}) == 0.0


def test_haiku_5_5_just_under_and_just_over_100_000_prompt_tokens() -> None:
    # exactly 100,000 prompt tokens (1,000 in + 9,000 written + 90,000 read) is not above:
    #   1,000 × 0.10 + 9,000 × 0.125 + 90,000 × 0.01 + 1,000 × 0.50 = 100 + 1,125 + 900 + 500
    under = {"input_tokens": 1_000, "cache_creation_input_tokens": 9_000,
             "cache_read_input_tokens": 90_000, "output_tokens": 1_000}
    assert cost("claude-haiku-5-5", under) == pytest.approx(0.002625, abs=1e-12)
    # one more input token: every token at the long tier, output included:
    #   1,001 × 0.50 + 9,000 × 0.625 + 90,000 × 0.05 + 1,000 × 2.50 = 500.5 + 5,625 + 4,500 + 2,500
    over = {**under, "input_tokens": 1_001}
    assert cost("claude-haiku-5-5", over) == pytest.approx(0.0131255, abs=1e-12)


def test_an_unknown_model_costs_null_and_snapshots_and_aliases_are_their_model() -> None:
    assert prices.price_of("claude-nonesuch-9") is None
    assert prices.cost(SPLIT, None) is None
    assert prices.price_of("claude-haiku-4-5-20251001") == prices.price_of("claude-haiku-4-5")
    assert prices.price_of("claude-opus-5-5-latest") == prices.price_of("claude-opus-5-5")


def test_every_model_of_the_installed_sdk_is_priced_or_knowingly_unpriced() -> None:
    """The table cannot rot: a model the SDK adds fails here until it is priced (from
    Anthropic's pricing page) or listed under [unpriced] with the reason."""
    listed = deprecations.sdk_models()
    assert len(listed) >= 10, "the SDK's model list could not be read"
    unpriced = prices.known_unpriced()
    missing = [m for m in listed if prices.price_of(m) is None and m not in unpriced]
    assert missing == [], f"price these in teamd/prices.toml (or list them under [unpriced]): " \
        f"{missing}"
    both = [m for m in unpriced if prices.price_of(m) is not None]
    assert both == [], f"priced and listed as unpriced: {both}"
    for model, price in prices.built_in().items():
        assert price.checked and price.source == "built-in", model


def test_prices_in_teamd_toml_override_and_add_with_the_usual_multiples(ws: Workspace) -> None:
    ws.settings_file.write_text(
        '[prices]\n"claude-sonnet-5-5" = {input = 4, output = 20}\n'
        '"my-model" = {input = 1, output = 5, cache_read = 0.05, long = {threshold = 1000, '
        'input = 2, output = 10}}\n')
    table = settings.load(ws).prices
    sonnet = prices.price_of("claude-sonnet-5-5", table)
    assert sonnet is not None and sonnet.source == "teamd.toml" and sonnet.checked is None
    assert sonnet.rates == prices.Rates(4.0, 20.0, 5.0, 8.0, 0.4)  # 1.25 ×, 2 ×, 0.1 ×
    # 1,000 × 4 + 6,000 × 5 + 4,000 × 8 + 100,000 × 0.4 + 2,000 × 20
    assert cost("claude-sonnet-5-5", SPLIT, table) == pytest.approx(0.146, abs=1e-12)
    mine = prices.price_of("my-model", table)
    assert mine is not None and mine.rates.cache_read == 0.05
    # the long tier's omitted cache rates are multiples of the tier's own input ($2)
    assert mine.long == prices.Long(1000, prices.Rates(2.0, 10.0, 2.5, 4.0, 0.2))
    assert prices.price_of("claude-opus-5-5", table) == prices.built_in()["claude-opus-5-5"]


def test_teamctl_prices_json_has_the_contracts_shape(ws: Workspace) -> None:
    ws.settings_file.write_text('[prices]\n"my-model" = {input = 1, output = 5}\n')
    doc = json.loads(cli(ws, "prices", "--json").stdout)
    rows = {row["model"]: row for row in doc["models"]}
    keys = {"model", "input", "output", "cache_write_5m", "cache_write_1h", "cache_read",
            "long", "checked", "source"}
    assert all(set(row) == keys for row in rows.values())
    assert rows["claude-haiku-5-5"]["long"] == {
        "threshold": 100000, "input": 0.5, "output": 2.5, "cache_write_5m": 0.625,
        "cache_write_1h": 1.0, "cache_read": 0.05}
    assert rows["claude-sonnet-5-5"]["cache_read"] == 0.1
    assert rows["claude-sonnet-5-5"]["checked"] == "2026-11-26"
    assert rows["my-model"] == {"model": "my-model", "input": 1.0, "output": 5.0,
                                "cache_write_5m": 1.25, "cache_write_1h": 2.0,
                                "cache_read": 0.1, "long": None, "checked": None,
                                "source": "teamd.toml"}
    assert "claude-mythos-preview" in doc["unpriced"] and "claude-fable-5-2" not in doc["unpriced"]
    assert rows["claude-fable-5-2"]["cache_read"] == 0.2  # 0.025 × input, as for 5.1
    text = cli(ws, "prices").stdout
    assert "claude-mythos-preview" in text.split("no price")[1]
