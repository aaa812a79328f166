//! The console's static files, embedded in the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Path under `/assets/`, content type, bytes.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "core.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/core.js"),
    ),
    (
        "keyvis.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/keyvis.js"),
    ),
    (
        "views.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/views.js"),
    ),
    (
        "metrics.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/metrics.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/style.css"),
    ),
    (
        "vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/vendor/uPlot.iife.min.js"),
    ),
    (
        "vendor/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/vendor/uPlot.min.css"),
    ),
    (
        "vendor/uPlot.LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("../assets/vendor/uPlot.LICENSE"),
    ),
];

const INDEX: &[u8] = include_bytes!("../assets/index.html");

/// `/`: the console's page.
pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `/assets/…`.
pub async fn asset(Path(path): Path<String>) -> Response {
    match ASSETS.iter().find(|(p, _, _)| *p == path) {
        Some((_, kind, bytes)) => ([(header::CONTENT_TYPE, *kind)], *bytes).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no asset {path}")).into_response(),
    }
}
