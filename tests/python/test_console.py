"""The web console (docs/console.md): the JSON it draws, and its views in headless Chromium.

The `/api/...` tests need no browser. The browser tests load each view afresh, wait for
`main#view[data-ready=VIEW]`, check what it shows against what the test wrote, fail on
any SEVERE browser-log entry (a JavaScript error or a failed request), and save a
screenshot, console-VIEW.png, to $ALMANAC_ARTIFACTS (else a pytest temporary directory).
They are skipped when Debian's chromium/chromium-driver are missing, unless $CI is set.
"""

from __future__ import annotations

import os
import re

import pytest
from google.cloud.bigtable import column_family as cf
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from console_helpers import (  # noqa: F401 - artifacts and browser are fixtures
    INSTANCE_NAME,
    Console,
    api,
    artifacts,
    b64,
    browser,
    bulk_write,
    clean_device_rows,
    enc,
    luminance,
    text_of,
    timestamp_first_rows,
    unb64,
    write_skewed,
    write_ts,
)
from test_timestream_query import now_ms, rec, ts_text

TS_STORAGE_INSTANCE = "projects/almanac/instances/timestream"
KV_METRICS = {"writes", "reads", "bytes_written", "bytes_read", "rows_scanned"}
HOT_LO, HOT_HI = b"hot#", b"hot$"  # every hot#NNNN key, nothing else


@pytest.fixture
def devops(ts):
    """A time-series table: cpu (DOUBLE) of h1 and h2 a minute apart, mem (BIGINT)."""
    t = ts.table()
    base = (now_ms() // 1000 - 600) * 1000  # whole seconds, ten minutes ago
    t.points = [  # (ms, host, cpu) in time order
        (base + i * 60_000, host, cpu)
        for i, (host, cpu) in enumerate([("h1", 1.5), ("h2", 2.25), ("h1", 3.75), ("h2", 0.5)])
    ]
    write_ts(
        t,
        [rec("cpu", str(v), t=ms, host=h, region="eu-west-1") for ms, h, v in t.points]
        + [rec("mem", "2048", "BIGINT", t=base, host="h1", region="eu-west-1")],
    )
    return t


def cpu_sql(t) -> str:
    return (
        f'SELECT time, host, measure_value::double AS cpu FROM "{t.db}"."{t.name}" '
        "WHERE measure_name = 'cpu' ORDER BY time"
    )


def covers_hot(rng: dict) -> bool:
    """Whether key range [start, end) holds any hot#NNNN key."""
    start, end = unb64(rng["start_b64"]), unb64(rng["end_b64"])
    return start < HOT_HI and (end == b"" or end > HOT_LO)


def kv_fragment(bt) -> str:
    return f"#/keyvis/bt/{enc(INSTANCE_NAME)}/{enc(bt.table_id)}"


def check_keyvis_shape(kv: dict) -> None:
    step = kv["step_ms"]
    assert step == 60_000, kv["step_ms"]
    times, ranges, values = kv["times"], kv["ranges"], kv["values"]
    assert times == sorted(times) and all(t % step == 0 for t in times), times
    # The current, unfinished step is included.
    assert times[-1] <= now_ms() < times[-1] + 2 * step, (times[-1], now_ms())
    assert len(values) == len(ranges) and all(len(row) == len(times) for row in values)
    for a, b in zip(ranges, ranges[1:]):
        assert a["end_b64"] == b["start_b64"], (a, b)
    assert ranges[-1]["end"] == "" and ranges[-1]["end_b64"] == "", ranges[-1]
    for r in ranges:
        start = unb64(r["start_b64"])
        if all(0x20 <= c < 0x7F for c in start):
            assert r["start"] == start.decode(), r
    assert kv["max"] == max(max(row) for row in values)
    assert kv["total"] == sum(map(sum, values))


# ---- the JSON API ----------------------------------------------------------------------


def test_api_overview(server, make_table, devops):
    bt = make_table(families={"cf1": cf.MaxVersionsGCRule(2), "cf2": None})
    doc = api(server, "/api/overview")
    assert doc["version"], doc
    assert os.path.realpath(doc["data_dir"]) == os.path.realpath(server.data_dir), doc["data_dir"]
    names = [i["name"] for i in doc["instances"]]
    assert TS_STORAGE_INSTANCE not in names, names
    inst = next(i for i in doc["instances"] if i["name"] == INSTANCE_NAME)
    assert all(not t["name"].startswith("_") for i in doc["instances"] for t in i["tables"])
    table = next(t for t in inst["tables"] if t["name"] == bt.table_id)
    families = {f["name"]: f for f in table["families"]}
    assert set(families) == {"cf1", "cf2"}, families
    assert "2" in families["cf1"]["gc_rule"], families["cf1"]
    assert table["deletion_protection"] is False

    db = next(d for d in doc["timeseries"] if d["database"] == devops.db)
    tst = next(t for t in db["tables"] if t["name"] == devops.name)
    assert tst["storage"]["instance"] == TS_STORAGE_INSTANCE, tst["storage"]
    assert {"host", "region"} <= set(tst["dimensions"]), tst["dimensions"]
    measures = {m["name"]: m["type"] for m in tst["measures"]}
    assert measures.get("cpu") == "DOUBLE" and measures.get("mem") == "BIGINT", measures


def test_api_sql(server, devops):
    doc = api(server, "/api/sql", body={"sql": cpu_sql(devops)})
    assert doc["columns"] == [
        {"name": "time", "type": "timestamp"},
        {"name": "host", "type": "string"},
        {"name": "cpu", "type": "number"},
    ]
    assert doc["rows"] == [[ts_text(ms), h, v] for ms, h, v in devops.points]
    assert doc["truncated"] is False
    assert isinstance(doc["elapsed_ms"], (int, float)) and doc["elapsed_ms"] >= 0
    assert api(server, "/api/sql", body={"sql": "SELECT FROM WHERE"}, expect=400)


def test_api_keyvis(server, make_table):
    bt = make_table(families={"cf": None})
    counts = write_skewed(bt)
    where = {"instance": INSTANCE_NAME, "table": bt.table_id}
    kv = api(server, "/api/keyvis", where)
    assert kv["metric"] == "writes" and set(kv["metrics"]) == KV_METRICS, kv["metrics"]
    check_keyvis_shape(kv)
    assert kv["total"] == sum(counts.values()) == 3100
    busiest = max(range(len(kv["ranges"])), key=lambda r: sum(kv["values"][r]))
    assert covers_hot(kv["ranges"][busiest]), kv["ranges"][busiest]

    few = api(server, "/api/keyvis", {**where, "rows": 4})
    assert 1 <= len(few["ranges"]) <= 4 and few["total"] == 3100, few["ranges"]
    zoom = api(server, "/api/keyvis", {**where, "lo": b64(HOT_LO), "hi": b64(HOT_HI)})
    assert 3000 <= zoom["total"] < 3100, zoom["total"]
    assert all(covers_hot(r) for r in zoom["ranges"]), zoom["ranges"]
    nbytes = api(server, "/api/keyvis", {**where, "metric": "bytes_written"})
    assert nbytes["metric"] == "bytes_written" and nbytes["total"] >= 3100 * 64

    api(server, "/api/keyvis", {**where, "metric": "bogus"}, expect=400)
    api(server, "/api/keyvis", {**where, "table": "no-such-table"}, expect=404)


# ---- the views -------------------------------------------------------------------------


@pytest.fixture
def console(browser, server, artifacts) -> Console:
    return Console(browser, server.console_url, artifacts)


def test_overview_view(console, make_table, devops):
    bt = make_table()
    console.open("#/", "overview")
    bt_rows = console.css(
        f'table#bt-tables tr[data-instance="{INSTANCE_NAME}"][data-table="{bt.table_id}"]'
    )
    assert len(bt_rows) == 1, "the new Bigtable table is not listed once"
    ts_rows = console.css(
        f'table#ts-tables tr[data-database="{devops.db}"][data-table="{devops.name}"]'
    )
    assert len(ts_rows) == 1, "the new time-series table is not listed once"
    assert not console.css(f'table#bt-tables tr[data-instance="{TS_STORAGE_INSTANCE}"]')
    console.shot("overview")
    console.assert_no_js_errors()


def test_table_view(console, make_table):
    bt = make_table(families={"cf1": cf.MaxVersionsGCRule(1), "cf2": None})
    bulk_write(bt, [(f"k{i}".encode(), b"v") for i in range(20)], family="cf1")
    console.open(f"#/table/{enc(INSTANCE_NAME)}/{enc(bt.table_id)}", "table")
    families = text_of(console.one("table#table-families"))
    assert "cf1" in families and "cf2" in families, families
    assert console.css("canvas#kv-canvas"), "no Key Visualizer on the table's page"
    console.wait("the advisor's findings", lambda: console.css("#lint-findings, #lint-clean"))
    console.shot("table")
    console.assert_no_js_errors()


def test_ts_table_view(console, devops):
    console.open(f"#/ts/{enc(devops.db)}/{enc(devops.name)}", "ts")
    dims = [text_of(li) for li in console.css("ul#ts-dimensions > li.dimension")]
    measures = [text_of(li) for li in console.css("ul#ts-measures > li.measure")]
    for want in ("host", "region"):
        assert any(want in d for d in dims), dims
    for want in ("cpu", "mem"):
        assert any(want in m for m in measures), measures
    assert console.css("canvas#kv-canvas"), "no Key Visualizer on the table's page"
    console.shot("ts")
    console.assert_no_js_errors()


def run_sql(console: Console, sql: str, state: str) -> None:
    console.open("#/sql", "sql")
    box = console.one("textarea#sql-input")
    box.clear()
    box.send_keys(sql)
    console.one("button#sql-run").click()
    console.wait(
        f"#sql-status[data-state={state}]",
        lambda: console.one("#sql-status").get_attribute("data-state") == state,
    )


def test_sql_view_shows_the_rows_written_and_a_chart(console, devops):
    run_sql(console, cpu_sql(devops), "done")
    headers = [text_of(th) for th in console.css("table#sql-result thead th")]
    assert headers == ["time", "host", "cpu"], headers
    shown = [
        [text_of(td) for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        for tr in console.css("table#sql-result tbody tr")
    ]
    assert len(shown) == len(devops.points), shown
    for (ms, host, cpu), (t_txt, h_txt, v_txt) in zip(devops.points, shown):
        # the same instant to the second, however the console lays the text out
        assert re.sub(r"\D", "", t_txt)[:14] == re.sub(r"\D", "", ts_text(ms))[:14], t_txt
        assert h_txt == host
        assert float(v_txt.replace(",", "")) == cpu, v_txt
    console.wait(
        "a line chart drawn in #sql-chart",
        lambda: [c for c in console.css("div#sql-chart canvas") if console.inked(c)],
    )
    console.shot("sql")
    console.assert_no_js_errors()


def test_sql_view_shows_a_bad_query_error(console, server):
    bad = "SELECT FROM WHERE"
    message = api(server, "/api/sql", body={"sql": bad}, expect=400)
    run_sql(console, bad, "error")
    shown = " ".join(text_of(console.one("#sql-error")).split())
    assert " ".join(message.split()) in shown, (message, shown)
    assert not console.css("table#sql-result tbody tr")
    console.assert_no_js_errors(allow=(r"/api/sql .*status of 400",))


def test_keyvis_view_shows_the_hot_range(console, make_table):
    bt = make_table(families={"cf": None})
    counts = write_skewed(bt)
    console.open(kv_fragment(bt), "keyvis")
    kv, layout = console.wait(
        "window.almanacKeyvis and window.almanacKeyvisLayout",
        lambda: console.driver.execute_script(
            "return window.almanacKeyvis && window.almanacKeyvisLayout"
            " ? [window.almanacKeyvis, window.almanacKeyvisLayout] : null"
        ),
    )
    assert bt.table_id in kv["table"] and kv["metric"] == "writes", kv["table"]
    assert kv["total"] == sum(counts.values())
    ranges, values = kv["ranges"], kv["values"]
    # The step the writes went to (the last one, unless a minute ended meanwhile).
    col = max(range(len(kv["times"])), key=lambda t: sum(row[t] for row in values))
    hot = max(range(len(ranges)), key=lambda r: values[r][col])
    assert covers_hot(ranges[hot]), ranges[hot]

    canvas = console.one("canvas#kv-canvas")

    def center(r: int) -> tuple[float, float]:
        return (
            layout["x0"] + col * layout["cellW"] + layout["cellW"] / 2,
            layout["y0"] + r * layout["cellH"] + layout["cellH"] / 2,
        )

    lum = [luminance(p) for p in console.pixels(canvas, [center(r) for r in range(len(ranges))])]
    top = max(lum)
    assert lum[hot] >= top - 2, f"the busiest range is not the brightest row: {lum}"
    brightest = [r for r, v in enumerate(lum) if v >= top - 2]
    assert all(covers_hot(ranges[r]) for r in brightest), [ranges[r] for r in brightest]
    cold = [r for r in range(len(ranges)) if values[r][col] and not covers_hot(ranges[r])]
    assert cold, "no cold range had writes in that step"
    assert max(lum[r] for r in cold) < top - 10, f"cold rows as bright as the hot one: {lum}"

    # Hover the hot cell: the tooltip names its range and value.
    x, y = console.driver.execute_script(
        "const [c, x, y] = arguments; let b = c.getBoundingClientRect();"
        "const at = () => [b.left + x * b.width / c.width, b.top + y * b.height / c.height];"
        "let p = at();"
        "if (p[1] < 0 || p[1] >= innerHeight || p[0] < 0 || p[0] >= innerWidth) {"
        "  scrollBy(p[0] - innerWidth / 2, p[1] - innerHeight / 2);"
        "  b = c.getBoundingClientRect(); p = at(); }"
        "return p;",
        canvas,
        *center(hot),
    )
    action = ActionBuilder(console.driver)
    action.pointer_action.move_to_location(int(x), int(y))
    action.perform()
    tip = console.wait(
        "#kv-tooltip naming the hot range",
        lambda: (el := console.one("div#kv-tooltip")).is_displayed() and "hot" in el.text and el,
    )
    assert str(values[hot][col]) in re.sub(r"[,\s\u202f]", "", tip.text), tip.text
    console.shot("keyvis")

    for sel in ("select#kv-table", "select#kv-window", "button#kv-reset"):
        assert console.css(sel), f"no {sel}"
    metric = Select(console.one("select#kv-metric"))
    assert KV_METRICS <= {o.get_attribute("value") for o in metric.options}
    metric.select_by_value("bytes_written")
    console.wait(
        "the bytes_written heat map",
        lambda: console.driver.execute_script(
            "return window.almanacKeyvis && window.almanacKeyvis.metric === 'bytes_written'"
        ),
    )
    console.assert_no_js_errors()


def test_missing_table_shows_an_error(console):
    console.load(f"#/keyvis/bt/{enc(INSTANCE_NAME)}/{enc('no-such-table')}")
    console.wait("an .error element", console.error_texts)
    console.assert_no_js_errors(allow=(r"/api/.* status of 404",))


def test_advisor_view(console, make_table):
    bad = make_table(families={"cf": None})
    bulk_write(bad, timestamp_first_rows(2000))
    console.open(f"#/advisor/bt/{enc(INSTANCE_NAME)}/{enc(bad.table_id)}", "advisor")
    found = console.css('#lint-findings div.finding[data-rule="timestamp-first-key"]')
    assert found, [f.get_attribute("data-rule") for f in console.css("div.finding")]
    assert found[0].get_attribute("data-severity") in ("warning", "info")
    for part in ("title", "evidence", "fix", "guide"):
        assert text_of(found[0].find_element(By.CSS_SELECTOR, f".{part}")), part
    assert not any(e.is_displayed() for e in console.css("#lint-clean"))
    console.shot("advisor")
    console.assert_no_js_errors()

    good = make_table(families={"m": cf.MaxVersionsGCRule(1)})
    bulk_write(good, clean_device_rows(), family="m")
    console.open(f"#/advisor/bt/{enc(INSTANCE_NAME)}/{enc(good.table_id)}", "advisor")
    assert console.one("#lint-clean").is_displayed()
    rules = [f.get_attribute("data-rule") for f in console.css("div.finding")]
    assert not rules, f"false alarm on a well-designed table: {rules}"
    console.assert_no_js_errors()


def test_metrics_view(console):
    console.open("#/metrics", "metrics")
    charts = console.css("div#metrics-charts div.chart[data-metric]")
    assert charts and all(c.get_attribute("data-metric") for c in charts), charts
    console.wait(
        "every chart drawn",
        lambda: all(
            any(console.inked(cv) for cv in ch.find_elements(By.CSS_SELECTOR, "canvas"))
            for ch in charts
        ),
    )
    polls = (
        "return performance.getEntriesByType('resource')"
        ".filter(e => e.name.includes('/api/stats')).length"
    )
    first = console.driver.execute_script(polls)
    console.wait(  # polled every 2 s
        "two more /api/stats polls",
        lambda: console.driver.execute_script(polls) >= first + 2,
        timeout=10,
    )
    console.shot("metrics")
    console.assert_no_js_errors()
