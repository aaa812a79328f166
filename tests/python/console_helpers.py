"""Helpers for the console, `/metrics` and schema-advisor suites (docs/console.md).

HTTP goes to the session server's console listener (`server.console_url`, 127.0.0.1)
through an opener that ignores any proxy settings. The browser is Debian's Chromium with
its own chromedriver, headless, on a fresh profile, with Selenium Manager kept offline.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import pytest
from google.cloud.bigtable.data import RowMutationEntry, SetCell
from prometheus_client.parser import text_string_to_metric_families
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from bt_helpers import INSTANCE, PROJECT

INSTANCE_NAME = f"projects/{PROJECT}/instances/{INSTANCE}"

# ---- HTTP ----------------------------------------------------------------------------

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def http(url: str, body: bytes | None = None, timeout: float = 60) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a GET, or of a JSON POST when `body` is given."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with _opener.open(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def api(server, path: str, params: dict | None = None, body=None, expect: int = 200):
    """The JSON answer of a console API call, requiring HTTP `expect`.

    An error answer (4xx/5xx) must be `{"error": "message"}`; its message is returned.
    """
    url = server.console_url + path
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = json.dumps(body).encode() if body is not None else None
    status, _, raw = http(url, data)
    text = raw.decode(errors="replace")
    assert status == expect, f"{path} {params or body}: HTTP {status}, wanted {expect}: {text}"
    doc = json.loads(text)
    if expect >= 400:
        assert isinstance(doc.get("error"), str) and doc["error"].strip(), doc
        return doc["error"]
    return doc


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


# ---- /metrics ------------------------------------------------------------------------


@dataclass
class Scrape:
    """One parsed /metrics page. Names are as exposed (counters keep `_total`)."""

    types: dict  # exposed family name -> "counter" | "gauge" | "histogram" | ...
    samples: list  # prometheus_client Sample(name, labels, value, ...)
    text: str  # the page as served

    def value(self, name: str, **labels) -> float:
        """Sum of the samples named `name` whose labels include `labels` (0 when none:
        a labelled series appears on first use)."""
        return sum(
            s.value
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    def series(self, name: str) -> list:
        return [s for s in self.samples if s.name == name]

    def buckets(self, name: str, **labels) -> list[tuple[float, float]]:
        """[(le, cumulative count)] of histogram `name`, summed over matching series."""
        out: dict[float, float] = {}
        for s in self.series(name + "_bucket"):
            if all(s.labels.get(k) == v for k, v in labels.items()):
                le = float(s.labels["le"])
                out[le] = out.get(le, 0) + s.value
        return sorted(out.items())


def scrape(server) -> Scrape:
    status, headers, raw = http(server.console_url + "/metrics")
    assert status == 200, f"/metrics: HTTP {status}: {raw[:500]!r}"
    ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    text = raw.decode()
    types: dict = {}
    samples: list = []
    for fam in text_string_to_metric_families(text):
        exposed = fam.name + "_total" if fam.type == "counter" else fam.name
        types[exposed] = fam.type
        samples.extend(fam.samples)
    return Scrape(types, samples, text)


def delta(before: Scrape, after: Scrape, name: str, **labels) -> float:
    return after.value(name, **labels) - before.value(name, **labels)


# ---- the schema advisor ----------------------------------------------------------------

BT_RULES = (
    "timestamp-first-key",
    "sequential-key",
    "write-hotspot",
    "hashed-key",
    "raw-bytes-key",
    "long-key",
    "too-many-families",
    "frequently-updated-row",
    "unbounded-versions",
)
TS_RULES = (
    "id-as-dimension",
    "changing-dimension",
    "sparse-multi-measure",
    "single-measure-records",
)


def lint_bt(server, table_id: str, instance: str = INSTANCE_NAME) -> dict:
    return api(server, "/api/lint", {"instance": instance, "table": table_id})


def lint_ts(server, db: str, table: str) -> dict:
    return api(server, "/api/lint", {"database": db, "ts_table": table})


def finding(report: dict, rule: str) -> dict:
    """The finding for `rule`, shape-checked; fails listing what was found instead."""
    assert rule in report["checked"], f"{rule} not checked: {report['checked']}"
    hits = [f for f in report["findings"] if f["rule"] == rule]
    assert hits, f"no {rule} finding; got {[f['rule'] for f in report['findings']]}: {report}"
    f = hits[0]
    assert f["severity"] in ("warning", "info"), f
    for k in ("title", "evidence", "fix", "guide"):
        assert isinstance(f.get(k), str) and f[k].strip(), f"{rule}: empty {k}: {f}"
    assert re.search(r"\d", f["evidence"]), f"{rule}: evidence has no numbers: {f['evidence']}"
    return f


# ---- building tables -----------------------------------------------------------------


def bulk_write(bt, rows, family: str = "cf", batch: int = 500) -> int:
    """MutateRows of `rows` = [(key, value) or (key, [SetCell, ...])]; returns entries sent.

    Keys may repeat (each entry counts as one write for the Key Visualizer)."""
    entries = []
    for key, what in rows:
        cells = what if isinstance(what, list) else [SetCell(family, b"q", what, 1000)]
        entries.append(RowMutationEntry(key, cells))
    for i in range(0, len(entries), batch):
        bt.data.bulk_mutate_rows(entries[i : i + batch])
    return len(entries)


def write_skewed(bt, hot: int = 10, per_hot: int = 300, cold: int = 100, family="cf") -> dict:
    """`hot` keys hot#0000.. written `per_hot` times each (overwriting one cell) and
    `cold` keys a#000..z#099 written once, interleaved. Returns {key: writes}."""
    counts: dict[bytes, int] = {}
    rows = []
    cold_keys = [f"{chr(97 + i % 26)}#{i:03d}".encode() for i in range(cold)]
    for round_ in range(per_hot):
        for h in range(hot):
            rows.append((f"hot#{h:04d}".encode(), b"x" * 64))
        if cold_keys and round_ % max(1, per_hot // cold) == 0:
            rows.append((cold_keys.pop(0), b"y" * 64))
    rows += [(k, b"y" * 64) for k in cold_keys]
    for k, _ in rows:
        counts[k] = counts.get(k, 0) + 1
    bulk_write(bt, rows, family=family)
    return counts


def timestamp_first_rows(n: int = 2000) -> list[tuple[bytes, bytes]]:
    """The anti-pattern: keys `EPOCHSECONDS#hostN` (10-digit epoch first)."""
    start = int(time.time()) - n
    return [(f"{start + i}#host{i % 10}".encode(), b"21.5") for i in range(n)]


def clean_device_rows(devices: int = 50, readings: int = 40) -> list[tuple[bytes, bytes]]:
    """A well-designed table: `kind#deviceid#(Long.MAX - ms)`, written in no key order."""
    now = int(time.time() * 1000)
    kinds = ("thermostat", "meter", "camera", "lock")
    rows = [
        (f"{kinds[d % 4]}#d{d:04d}#{2**63 - 1 - (now - r * 60_000)}".encode(), b"21.5")
        for d in range(devices)
        for r in range(readings)
    ]
    random.Random(11).shuffle(rows)
    return rows


def write_ts(table, records) -> None:
    """WriteRecords in batches of 100 (the API's maximum)."""
    for i in range(0, len(records), 100):
        table.write(records[i : i + 100])


def enc(component: str) -> str:
    """encodeURIComponent for the console's fragments (our names need no other escapes)."""
    return urllib.parse.quote(component, safe="")


# ---- the browser ---------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
    "--window-size=1400,900",
)
WAIT_S = 30
_TRANSIENT = (NoSuchElementException, StaleElementReferenceException)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Where screenshots go: $ALMANAC_ARTIFACTS, else a pytest temporary directory."""
    path = os.environ.get("ALMANAC_ARTIFACTS")
    if path:
        os.makedirs(path, exist_ok=True)
        return path
    return str(tmp_path_factory.mktemp("console-artifacts"))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium through Debian's chromedriver (skipped without them, unless CI)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        msg = (
            f"{' and '.join(missing)} not installed: the console's browser tests need "
            "Debian's chromium and chromium-driver (scripts/test installs them)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # Selenium Manager never reaches the network
        mp.setenv("TZ", "UTC")  # times render as the API gives them
        for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            mp.delenv(var, raising=False)  # selenium <-> chromedriver stays direct
        opts = Options()
        opts.binary_location = CHROMIUM
        for arg in CHROME_ARGS:
            opts.add_argument(arg)
        opts.add_argument(f"--user-data-dir={profile}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(CHROMEDRIVER, log_output=str(profile.parent / "chromedriver.log"))
        driver = webdriver.Chrome(service=service, options=opts)
        driver.set_page_load_timeout(60)
        try:
            yield driver
        finally:
            driver.quit()


class Console:
    """The console in the browser: open a view, wait for it, check the JS log, screenshot."""

    def __init__(self, driver, base_url: str, artifacts_dir: str):
        self.driver = driver
        self.base = base_url
        self.artifacts = artifacts_dir

    def load(self, fragment: str) -> None:
        """Load `/` + fragment afresh (not a same-document fragment change)."""
        self.driver.get("about:blank")
        self.logs()  # drop what earlier pages logged
        self.driver.get(f"{self.base}/{fragment}")

    def open(self, fragment: str, ready: str):
        """load(fragment) and wait for `main#view[data-ready=ready]`."""
        self.load(fragment)
        self.wait(
            f"{fragment} to become data-ready={ready!r}",
            lambda: self.one("main#view").get_attribute("data-ready") == ready,
        )
        return self.one("main#view")

    def css(self, selector: str):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def wait(self, what: str, predicate, timeout: float = WAIT_S):
        """Wait until predicate() is truthy; returns its value."""
        try:
            return WebDriverWait(
                self.driver, timeout, poll_frequency=0.2, ignored_exceptions=_TRANSIENT
            ).until(lambda _: predicate())
        except TimeoutException:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; errors shown: "
                f"{self.error_texts()}; browser log: {self.logs()}"
            ) from None

    def error_texts(self) -> list[str]:
        try:
            return [t for t in map(text_of, self.css(".error")) if t]
        except Exception:  # noqa: BLE001 - only diagnostics
            return []

    def logs(self) -> list[dict]:
        return self.driver.get_log("browser")

    def assert_no_js_errors(self, allow: tuple[str, ...] = ()) -> None:
        """No SEVERE browser log entry since the last look, but for a missing favicon
        and messages matching one of the `allow` regexes."""
        severe = [
            e["message"]
            for e in self.logs()
            if e["level"] == "SEVERE"
            and "favicon.ico" not in e["message"]
            and not any(re.search(a, e["message"]) for a in allow)
        ]
        assert not severe, f"JavaScript/console errors: {severe}"

    def shot(self, name: str) -> str:
        path = os.path.join(self.artifacts, f"console-{name}.png")
        assert self.driver.save_screenshot(path), path
        print(f"screenshot: {path}")
        return path

    def pixels(self, canvas, points) -> list[tuple[int, int, int, int]]:
        """RGBA at canvas pixel coordinates [(x, y), ...] (getImageData)."""
        return [
            tuple(p)
            for p in self.driver.execute_script(
                "const ctx = arguments[0].getContext('2d');"
                "return arguments[1].map(([x, y]) => Array.from("
                "  ctx.getImageData(Math.floor(x), Math.floor(y), 1, 1).data));",
                canvas,
                [list(p) for p in points],
            )
        ]

    def inked(self, canvas) -> int:
        """How many pixels of a 2D canvas are not fully transparent."""
        return self.driver.execute_script(
            "const c = arguments[0];"
            "if (!c.width || !c.height) return 0;"
            "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++;"
            "return n;",
            canvas,
        )


def text_of(element) -> str:
    """An element's text as in the DOM (textContent: no CSS text-transform), trimmed."""
    return (element.get_attribute("textContent") or "").strip()


def luminance(rgba) -> float:
    r, g, b = rgba[:3]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def wait_until(what: str, predicate, timeout: float = 30, every: float = 0.2):
    """Poll predicate() until it returns something truthy; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)
