//! The stylesheet and the script, compiled into the binary.

use axum::http::header;
use axum::response::IntoResponse;

/// The stylesheet: light and dark (by `prefers-color-scheme`), 1280 px to phone width.
pub(crate) const CSS: &str = include_str!("assets/style.css");
/// The auto-refresh: fetches the page's live part and swaps it in.
pub(crate) const JS: &str = include_str!("assets/app.js");

pub(crate) async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        CSS,
    )
}

pub(crate) async fn js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        JS,
    )
}
