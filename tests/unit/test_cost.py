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

from aca_gpu import cost, price_refresh, units
from aca_gpu.errors import BadInput
from aca_gpu.gpu.profiles import profile_catalog, resolve_profile


@pytest.fixture
def bundled() -> cost.PriceTable:
    return cost.bundled_prices()


def test_bundled_table_prices_every_profile_with_dated_sourced_meters(bundled: cost.PriceTable) -> None:
    assert bundled.doc["source"] and bundled.doc["date"] and bundled.doc["currency"] == "USD"
    assert {"eastus", "southcentralus", "westeurope"} <= set(bundled.regions)
    for region in bundled.regions:
        for profile in profile_catalog():
            for meter, qty in bundled.replica_meters(profile, region):
                assert meter.region == region and meter.per_second > 0 and qty > 0
                assert meter.date and meter.source, (region, meter.name)
                if meter.unconfirmed:
                    assert meter.unconfirmed.startswith("UNCONFIRMED"), meter
    # the meters read for eastus are confirmed; the dedicated GPU meter there is inferred and says so
    assert bundled.unconfirmed(resolve_profile("t4"), "eastus") == []
    assert bundled.unconfirmed(resolve_profile("nc24-a100"), "eastus") == ["Dedicated GPU Usage"]


@pytest.mark.parametrize(("gpu", "hourly"), [("t4", 1.56), ("a100", 6.35)])
def test_eastus_serverless_replica_matches_acas_meters(
    bundled: cost.PriceTable, gpu: str, hourly: float
) -> None:
    """GPU meter on top of the vCPU and memory meters: T4 ≈ $1.56/h, A100 ≈ $6.35/h (eastus, 2026-08)."""
    assert cost.price_per_hour(gpu, bundled, "eastus") == pytest.approx(hourly, rel=0.05)
    est = cost.estimate(gpu, 3600, prices=bundled, location="eastus")
    assert est.breakdown["gpu"] < est.breakdown["vcpu"] + est.breakdown["memory"]  # the GPU is not all
    assert "eastus meters, bundled table" in est.basis and est.table.startswith("bundled table")


def test_serverless_estimate_sums_gpu_vcpu_and_memory(bundled: cost.PriceTable) -> None:
    t4 = resolve_profile("t4")
    est = cost.estimate("Consumption-GPU-NC8as-T4", 600, replicas=2, prices=bundled)
    per_replica_second = sum(m.per_second * q for m, q in bundled.replica_meters(t4))
    assert per_replica_second == pytest.approx(0.000073 + 8 * 0.000024 + 56 * 0.000003)
    assert est.usd == pytest.approx(per_replica_second * 600 * 2)
    assert est.gpu_seconds == 1200
    assert est.is_estimate and est.basis.startswith("estimate:")
    assert set(est.breakdown) == {"gpu", "vcpu", "memory"}
    assert sum(est.breakdown.values()) == pytest.approx(est.usd)


def test_regions_price_differently(bundled: cost.PriceTable) -> None:
    east = cost.estimate("t4", 3600, prices=bundled, location="eastus")
    south = cost.estimate("t4", 3600, prices=bundled, location="southcentralus")
    assert south.breakdown["gpu"] == pytest.approx(0.000088 * 3600)  # the southcentralus T4 meter
    assert south.usd > east.usd and "southcentralus meters" in south.basis
    assert "UNCONFIRMED: Standard vCPU Active Usage" in south.basis  # inferred there, and said


def test_estimate_scales_linearly_and_accepts_profiles_or_aliases(bundled: cost.PriceTable) -> None:
    one = cost.estimate(resolve_profile("a100"), 60, prices=bundled)
    assert cost.estimate("a100", 120, prices=bundled).usd == pytest.approx(2 * one.usd)
    assert cost.estimate("a100", 0, prices=bundled).usd == 0
    assert cost.estimate("a100", 60, prices=bundled).usd > cost.estimate("t4", 60, prices=bundled).usd


def test_dedicated_estimate_is_node_hours_plus_management(bundled: cost.PriceTable) -> None:
    est = cost.estimate("nc48-a100", 1800, replicas=1, prices=bundled)
    node_hour = 2 * 3.735 + 48 * 0.0571 + 440 * 0.005  # 2 GPUs, 48 vCPU, 440 GiB on Dedicated meters
    assert est.usd == pytest.approx(node_hour / 2 + 0.1 / 2)
    assert est.breakdown["management"] == pytest.approx(0.05)
    assert est.gpu_seconds == 1800 * 2  # two GPUs per NC48 node
    assert "plan management" in est.basis and "UNCONFIRMED: Dedicated GPU Usage" in est.basis


def test_location_mismatch_is_said_in_the_basis(bundled: cost.PriceTable) -> None:
    basis = cost.estimate("t4", 60, location="swedencentral", prices=bundled).basis
    assert "eastus meters" in basis and "swedencentral may differ" in basis


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
    _item("Hybrid vCPU Usage", 0.000001, "1 Second", sku="Hybrid"),  # Azure Arc: must never win
    _item("Standard vCPU Active Usage", 0.5, "1 Second", region="westeurope"),
]
PAGE_2 = [
    _item("Standard NC A100 v4 GPU Usage", 3.2, "1 Hour"),
    _item("Standard NC T4 v3 GPU Usage", 0.00025, "1 Second"),
    _item("Standard NV A10 v5 GPU Usage", 0.0002, "1 Second"),  # a GPU acagpu has no profile for
    _item("Dedicated Plan Management", 0.12, "1 Hour", sku="Dedicated"),
    _item("Dedicated GPU Usage", 4.0, "1 Hour", sku="Dedicated"),
    _item("Dedicated vCPU Usage", 0.06, "1 Hour", sku="Dedicated"),
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


def test_refresh_matches_acas_meter_names_and_reports_the_rest(server: str, tmp_path: Path) -> None:
    cache = tmp_path / "prices.json"
    warnings: list[str] = []
    table = price_refresh.refresh_prices(cache, endpoint=server, warn=warnings.append)
    assert table.origin == "cache" and table.label.startswith("refreshed ") and "eastus" in table.label
    assert "serviceName eq 'Azure Container Apps'" in parse_qs(urlparse(_Handler.seen[0]).query)["$filter"][0]
    assert len(_Handler.seen) == 2  # followed NextPageLink
    # active vCPU, not idle, not westeurope, not the Arc meter
    assert table.meter("Standard vCPU Active Usage").per_second == pytest.approx(0.000034)
    assert table.meter("Standard Memory Active Usage").per_second == pytest.approx(0.0000043)
    assert table.meter("Standard NC A100 v4 GPU Usage").per_second == pytest.approx(3.2 / 3600)
    assert table.meter("Standard NC T4 v3 GPU Usage").per_second == pytest.approx(0.00025)
    assert table.meter("Dedicated GPU Usage").per_hour == pytest.approx(4.0)  # refreshed, no NC size
    assert table.meter("Dedicated Plan Management").per_hour == pytest.approx(0.12)
    assert table.meter("Dedicated GPU Usage").unconfirmed is None
    kept = table.meter("Dedicated Memory Usage")  # not listed: kept, and labelled
    assert kept.per_hour == pytest.approx(0.005) and kept.unconfirmed and "not listed" in kept.unconfirmed
    report = table.doc["refreshed"]["regions"]["eastus"]
    assert report["missing"] == ["Dedicated Memory Usage"]
    assert report["hybrid"] == ["Hybrid vCPU Usage"]
    assert report["unknown_gpu"] == ["Standard NV A10 v5 GPU Usage"]
    assert any("Dedicated Memory Usage" in w for w in warnings)
    assert any("Standard NV A10 v5 GPU Usage" in w for w in warnings)
    assert any("Hybrid" in w for w in warnings)
    cached = cost.load_prices(cache)
    assert cached.origin == "cache" and cached.meter(
        "Standard vCPU Active Usage"
    ).per_second == pytest.approx(0.000034)
    bundled = cost.bundled_prices()
    assert cost.estimate("t4", 100, prices=cached).usd != cost.estimate("t4", 100, prices=bundled).usd
    assert "refreshed" in cost.estimate("t4", 100, prices=cached).basis
    # other regions keep the bundled meters
    assert cached.meter("Standard NC T4 v3 GPU Usage", "southcentralus").per_second == pytest.approx(0.000088)


def test_refresh_falls_back_with_a_warning_on_http_error(server: str, tmp_path: Path) -> None:
    _Handler.status = 503
    warnings: list[str] = []
    table = price_refresh.refresh_prices(tmp_path / "prices.json", endpoint=server, warn=warnings.append)
    assert table.origin == "bundled" and not (tmp_path / "prices.json").exists()
    assert len(warnings) == 1 and "could not refresh prices" in warnings[0] and "bundled table" in warnings[0]


def test_refresh_falls_back_when_nothing_listens(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    warnings: list[str] = []
    table = price_refresh.refresh_prices(
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
    got = units.per_second(price, unit)
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
