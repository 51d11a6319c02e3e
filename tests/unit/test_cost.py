"""Cost estimates from the bundled table, and the Retail Prices refresh against a loopback server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from aca_gpu import cost
from aca_gpu.errors import BadInput
from aca_gpu.gpu.profiles import profile_catalog, resolve_profile


@pytest.fixture
def bundled() -> cost.PriceTable:
    return cost.bundled_prices()


def test_bundled_table_prices_every_profile_with_a_source(bundled: cost.PriceTable) -> None:
    assert bundled.doc["source"] and bundled.doc["date"] and bundled.doc["currency"] == "USD"
    for profile in profile_catalog():
        rates = bundled.profile_rates(profile.type)
        assert rates["source"]
        key = "gpu_second" if profile.serverless else "node_hour"
        assert rates["billing"] == ("per-second" if profile.serverless else "per-node-hour")
        assert float(rates[key]) > 0


def test_serverless_estimate_sums_gpu_vcpu_and_memory(bundled: cost.PriceTable) -> None:
    t4 = resolve_profile("t4")
    est = cost.estimate("Consumption-GPU-NC8as-T4", 600, replicas=2, prices=bundled)
    rates = bundled.profile_rates(t4.type)
    per_replica_second = (
        float(rates["gpu_second"])
        + bundled.vcpu_second * t4.container_cpu
        + bundled.gib_second * t4.container_memory_gib
    )
    assert est.usd == pytest.approx(per_replica_second * 600 * 2)
    assert est.gpu_seconds == 1200
    assert est.is_estimate and est.basis.startswith("estimate:")
    assert set(est.breakdown) == {"gpu", "vcpu", "memory"}
    assert sum(est.breakdown.values()) == pytest.approx(est.usd)


def test_estimate_scales_linearly_and_accepts_profiles_or_aliases(bundled: cost.PriceTable) -> None:
    one = cost.estimate(resolve_profile("a100"), 60, prices=bundled)
    assert cost.estimate("a100", 120, prices=bundled).usd == pytest.approx(2 * one.usd)
    assert cost.estimate("a100", 0, prices=bundled).usd == 0
    assert cost.estimate("a100", 60, prices=bundled).usd > cost.estimate("t4", 60, prices=bundled).usd


def test_dedicated_estimate_is_node_hours_plus_management(bundled: cost.PriceTable) -> None:
    est = cost.estimate("nc48-a100", 1800, replicas=1, prices=bundled)
    node_hour = float(bundled.profile_rates("NC48-A100")["node_hour"])
    assert est.usd == pytest.approx(node_hour / 2 + bundled.management_hour / 2)
    assert est.gpu_seconds == 1800 * 2  # two GPUs per NC48 node
    assert "plan management" in est.basis


def test_location_mismatch_is_said_in_the_basis(bundled: cost.PriceTable) -> None:
    assert (
        "swedencentral may differ" in cost.estimate("t4", 60, location="swedencentral", prices=bundled).basis
    )


def test_bad_inputs(bundled: cost.PriceTable) -> None:
    with pytest.raises(BadInput):
        cost.estimate("t4", -1, prices=bundled)
    with pytest.raises(BadInput):
        cost.estimate("h100", 60, prices=bundled)


def test_plan_serverless_bills_both_replicas(bundled: cost.PriceTable) -> None:
    plan = cost.estimate_plan("t4", explorer_minutes=10, tester_minutes=5, prices=bundled)
    assert plan.usd == pytest.approx(
        cost.estimate("t4", 600, prices=bundled).usd + cost.estimate("t4", 300, prices=bundled).usd
    )
    assert plan.is_estimate and plan.as_dict()["tester"]["gpu_seconds"] == 300


def test_plan_dedicated_bills_one_node_for_the_longer_phase(bundled: cost.PriceTable) -> None:
    plan = cost.estimate_plan("nc24-a100", explorer_minutes=10, tester_minutes=30, prices=bundled)
    assert plan.usd == pytest.approx(cost.estimate("nc24-a100", 1800, prices=bundled).usd)


def test_catalog_prices_cover_every_profile(bundled: cost.PriceTable) -> None:
    hourly = cost.catalog_prices(bundled)
    assert set(hourly) == {p.type for p in profile_catalog()}
    assert hourly["NC96-A100"] > hourly["NC48-A100"] > hourly["NC24-A100"]


# -- refresh ---------------------------------------------------------------------------------


def _item(
    meter: str,
    price: float,
    unit: str,
    *,
    sku: str = "Standard",
    product: str = "Azure Container Apps",
    region: str = "eastus",
) -> dict[str, Any]:
    """One item in the Retail Prices API's documented shape."""
    return {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": "US East",
        "effectiveStartDate": "2025-01-01T00:00:00Z",
        "meterId": "00000000-0000-0000-0000-000000000000",
        "meterName": meter,
        "productId": "DZH318Z0BQ4B",
        "skuId": "DZH318Z0BQ4B/0001",
        "productName": product,
        "skuName": sku,
        "serviceName": "Azure Container Apps",
        "serviceId": "DZH318Z0BQ4B",
        "serviceFamily": "Compute",
        "unitOfMeasure": unit,
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": "",
    }


PAGE_1 = [
    _item("Standard vCPU Active Usage", 0.000034, "1 Second"),
    _item("Standard vCPU Idle Usage", 0.000004, "1 Second"),
    _item("Standard Memory Active Usage", 0.0000043, "1 GiB Second"),
    _item("Standard vCPU Active Usage", 0.5, "1 Second", region="westeurope"),
]
PAGE_2 = [
    _item("Serverless GPU NC A100 Usage", 3.2, "1 Hour", sku="Serverless GPU NC A100"),
    _item("Serverless GPU T4 Usage", 0.00025, "1 Second", sku="Serverless GPU T4"),
    _item("Dedicated Plan Management", 0.12, "1 Hour", sku="Dedicated"),
    _item("Dedicated NC24 A100 Instance", 4.0, "1 Hour", sku="Dedicated NC24 A100"),
    _item("Standard Requests", 0.4, "1M"),
]


class _Handler(BaseHTTPRequestHandler):
    status = 200
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        query = parse_qs(urlparse(self.path).query)
        if type(self).status != 200:
            self.send_error(type(self).status)
            return
        if query.get("page") == ["2"]:
            body = {"Items": PAGE_2, "NextPageLink": None, "Count": len(PAGE_2)}
        else:
            host, port = self.server.server_address[:2]
            body = {
                "BillingCurrency": "USD",
                "CustomerEntityId": "Default",
                "CustomerEntityType": "Retail",
                "Items": PAGE_1,
                "NextPageLink": f"http://{host}:{port}/api/retail/prices?page=2",
                "Count": len(PAGE_1),
            }
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.status, _Handler.seen = 200, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api/retail/prices"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_refresh_parses_pages_and_caches(server: str, tmp_path: Path) -> None:
    cache = tmp_path / "prices.json"
    warnings: list[str] = []
    table = cost.refresh_prices(cache, endpoint=server, warn=warnings.append)
    assert warnings == []
    assert table.origin == "retail-api"
    assert "serviceName eq 'Azure Container Apps'" in parse_qs(urlparse(_Handler.seen[0]).query)["$filter"][0]
    assert len(_Handler.seen) == 2  # followed NextPageLink
    assert table.vcpu_second == pytest.approx(0.000034)  # eastus active rate, not idle, not westeurope
    assert table.gib_second == pytest.approx(0.0000043)
    assert table.management_hour == pytest.approx(0.12)
    assert float(table.profile_rates("Consumption-GPU-NC24-A100")["gpu_second"]) == pytest.approx(3.2 / 3600)
    assert float(table.profile_rates("Consumption-GPU-NC8as-T4")["gpu_second"]) == pytest.approx(0.00025)
    assert float(table.profile_rates("NC24-A100")["node_hour"]) == pytest.approx(4.0)
    bundled = cost.bundled_prices()
    assert table.profile_rates("NC48-A100") == bundled.profile_rates("NC48-A100")  # not in the API: kept
    assert "kept from the bundled table" in table.source
    cached = cost.load_prices(cache)
    assert cached.origin == "cache" and cached.vcpu_second == pytest.approx(0.000034)
    assert cost.estimate("t4", 100, prices=cached).usd != cost.estimate("t4", 100, prices=bundled).usd


def test_refresh_falls_back_with_a_warning_on_http_error(server: str, tmp_path: Path) -> None:
    _Handler.status = 503
    warnings: list[str] = []
    table = cost.refresh_prices(tmp_path / "prices.json", endpoint=server, warn=warnings.append)
    assert table.origin == "bundled" and not (tmp_path / "prices.json").exists()
    assert len(warnings) == 1 and "could not refresh prices" in warnings[0]


def test_refresh_falls_back_when_nothing_listens(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    warnings: list[str] = []
    table = cost.refresh_prices(
        tmp_path / "p.json", endpoint=f"http://127.0.0.1:{port}/x", timeout=2, warn=warnings.append
    )
    assert table.origin == "bundled" and warnings


def test_load_prices_ignores_a_corrupt_cache(tmp_path: Path) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text("{not json", encoding="utf-8")
    assert cost.load_prices(bad).origin == "bundled"
    assert cost.load_prices(tmp_path / "missing.json").origin == "bundled"


@pytest.mark.parametrize(
    ("price", "unit", "per_second"),
    [
        (3.6, "1 Hour", 0.001),
        (0.5, "1 Second", 0.5),
        (1.0, "100 Seconds", 0.01),
        (2.0, "1M Seconds", 2e-6),
        (0.36, "1 GiB Hour", 0.0001),
        (0.4, "1M", None),
        (1.0, "1/Month", None),
    ],
)
def test_unit_of_measure(price: float, unit: str, per_second: float | None) -> None:
    got = cost._per_second(price, unit)
    assert got == (pytest.approx(per_second) if per_second is not None else None)


def test_profiles_refresh_prices_flag_uses_the_api_and_its_cache(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json as _json

    from click.testing import CliRunner

    from aca_gpu.cli import cli

    monkeypatch.setenv("ACAGPU_PRICES_URL", server)
    monkeypatch.setenv("ACAGPU_CACHE_DIR", str(tmp_path))
    result = CliRunner().invoke(cli, ["profiles", "--offline", "--refresh-prices", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    doc = _json.loads(result.stdout)
    assert doc["prices"]["origin"] == "cache" and doc["prices"]["estimate"] is True
    assert (tmp_path / "prices.json").exists()
    t4 = next(p for p in doc["profiles"] if p["type"] == "Consumption-GPU-NC8as-T4")
    bundled = next(
        p
        for p in _json.loads(CliRunner().invoke(cli, ["profiles", "--offline", "-o", "json"]).stdout)[
            "profiles"
        ]
        if p["type"] == t4["type"]
    )
    assert t4["price_per_hour_usd"] == bundled["price_per_hour_usd"]  # both read the refreshed cache now

    _Handler.status = 503
    (tmp_path / "prices.json").unlink()
    result = CliRunner().invoke(cli, ["profiles", "--offline", "--refresh-prices", "-o", "json"])
    assert result.exit_code == 0
    assert "could not refresh prices" in result.stderr
    assert _json.loads(result.stdout)["prices"]["origin"] == "bundled"
