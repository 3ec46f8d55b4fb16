//! Who may look (basic authentication) and which requests may act (the
//! CSRF token and the same-origin check).

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The one user and password the dashboard lets in.
#[derive(Clone)]
pub(crate) struct BasicAuth {
    pub(crate) user: String,
    password: String,
}

impl BasicAuth {
    pub(crate) fn new(user: String, password: String) -> Self {
        Self { user, password }
    }

    /// Whether an `Authorization` header value names this user and password.
    fn admits(&self, authorization: &str) -> bool {
        let Some(encoded) = authorization
            .strip_prefix("Basic ")
            .or_else(|| authorization.strip_prefix("basic "))
        else {
            return false;
        };
        let Ok(decoded) = STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Some(colon) = decoded.iter().position(|&b| b == b':') else {
            return false;
        };
        let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
        // Both compared in full whatever the first gives, in constant time.
        same(user, self.user.as_bytes()) & same(password, self.password.as_bytes())
    }
}

/// Refuses (401) every request without the right basic authentication.
pub(crate) async fn require_basic(
    State(basic): State<Arc<BasicAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let admitted = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| basic.admits(value));
    if admitted {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"jobq\", charset=\"UTF-8\"",
            )],
            "this dashboard needs a user and password\n",
        )
            .into_response()
    }
}

/// A fresh CSRF token: 32 random hex digits.
pub(crate) fn new_token() -> String {
    let bytes: [u8; 16] = rand::random();
    let mut token = String::with_capacity(32);
    for b in bytes {
        let _ = write!(token, "{b:02x}");
    }
    token
}

/// Equal byte strings, compared in time that depends on their lengths only.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why a state-changing request is refused, if it is.
pub(crate) fn refusal(headers: &HeaderMap, expected: &str, token: Option<&str>) -> Option<String> {
    if let Some(origin) = cross_origin(headers) {
        return Some(format!(
            "refused: the request came from another site ({origin})"
        ));
    }
    match token {
        Some(token) if same(token.as_bytes(), expected.as_bytes()) => None,
        Some(_) => {
            Some("refused: the form's token is not this dashboard's (reload the page)".into())
        }
        None => Some("refused: the request carries no form token".into()),
    }
}

/// The origin a request names when it is not the host it was sent to:
/// `Origin`, else `Referer`; neither sent passes (the token still guards).
fn cross_origin(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok())?;
    let named = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok())?;
    let authority = named
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default());
    match authority {
        Some(authority) if authority.eq_ignore_ascii_case(host) => None,
        _ => Some(named.chars().take(100).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn basic_auth_admits_its_user_and_password_only() {
        let basic = BasicAuth::new("ops".into(), "s3:cret".into());
        let value = |s: &str| format!("Basic {}", STANDARD.encode(s));
        assert!(basic.admits(&value("ops:s3:cret")));
        assert!(!basic.admits(&value("ops:s3:cre")));
        assert!(!basic.admits(&value("op:s3:cret")));
        assert!(!basic.admits(&value("ops")));
        assert!(!basic.admits("Bearer x"));
        assert!(!basic.admits("Basic !!!"));
    }

    #[test]
    fn a_request_from_another_origin_is_refused_even_with_the_token() {
        let same_site = headers(&[
            (header::HOST, "127.0.0.1:8080"),
            (header::ORIGIN, "http://127.0.0.1:8080"),
        ]);
        assert_eq!(refusal(&same_site, "t", Some("t")), None);
        let other = headers(&[
            (header::HOST, "127.0.0.1:8080"),
            (header::ORIGIN, "https://evil.example"),
        ]);
        assert!(
            refusal(&other, "t", Some("t"))
                .unwrap()
                .contains("another site")
        );
        let referer = headers(&[
            (header::HOST, "127.0.0.1:8080"),
            (header::REFERER, "http://evil.example/127.0.0.1:8080"),
        ]);
        assert!(refusal(&referer, "t", Some("t")).is_some());
        let null = headers(&[(header::HOST, "h"), (header::ORIGIN, "null")]);
        assert!(refusal(&null, "t", Some("t")).is_some());
    }

    #[test]
    fn a_missing_or_wrong_token_is_refused() {
        let plain = headers(&[(header::HOST, "h")]);
        assert!(
            refusal(&plain, "t", None)
                .unwrap()
                .contains("no form token")
        );
        assert!(
            refusal(&plain, "t", Some("u"))
                .unwrap()
                .contains("not this")
        );
        assert_eq!(refusal(&plain, "t", Some("t")), None);
        assert_eq!(new_token().len(), 32);
        assert_ne!(new_token(), new_token());
    }
}
