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

/// The host names the dashboard answers to; a request for any other is
/// refused before it reaches a page (the DNS rebinding guard).
///
/// Served without asking: `localhost` and its subdomains (browsers resolve
/// them to loopback themselves) and every IP address (an address cannot be
/// re-pointed elsewhere by DNS). Names are added with
/// [`Dashboard::allow_host`](crate::Dashboard::allow_host).
#[derive(Debug, Clone, Default)]
pub(crate) struct Hosts {
    /// `*` was allowed: every host is served.
    any: bool,
    /// Lowercase, without a trailing dot or a port; `.example.com` stands
    /// for example.com and its subdomains.
    names: Vec<String>,
}

impl Hosts {
    /// Adds a name as [`Dashboard::allow_host`](crate::Dashboard::allow_host) takes it.
    pub(crate) fn allow(&mut self, name: &str) {
        let name = name.trim();
        if name == "*" {
            self.any = true;
            return;
        }
        let (dot, rest) = match name.strip_prefix('.') {
            Some(rest) => (".", rest),
            None => ("", name),
        };
        // A port given with the name is not compared (as Django does).
        let rest = host_name(rest).unwrap_or_else(|| rest.to_ascii_lowercase());
        if !rest.is_empty() {
            self.names.push(format!("{dot}{rest}"));
        }
    }

    /// Whether `host` (a host name as [`host_name`] gives it) is served.
    pub(crate) fn serves(&self, host: &str) -> bool {
        if self.any || is_ip_literal(host) || host == "localhost" || host.ends_with(".localhost") {
            return true;
        }
        self.names.iter().any(|name| match name.strip_prefix('.') {
            Some(domain) => {
                host == domain
                    || host
                        .strip_suffix(domain)
                        .is_some_and(|sub| sub.ends_with('.'))
            }
            None => host == name,
        })
    }
}

/// The host of an authority (`Host: Example.com.:8080` → `example.com`):
/// lowercase, without its port or a trailing dot; an IPv6 address keeps
/// its brackets. `None` if it is not an authority, or names a user.
pub(crate) fn host_name(authority: &str) -> Option<String> {
    if authority.contains('@') {
        return None;
    }
    let parsed: axum::http::uri::Authority = authority.parse().ok()?;
    let host = parsed.host().trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

fn is_ip_literal(host: &str) -> bool {
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => host.parse::<std::net::Ipv4Addr>().is_ok(),
    }
}

/// The authority a request was sent to: its `Host` header (HTTP/1.1), or
/// its URI's authority (HTTP/2's `:authority`, or an absolute-form
/// request); `Err` with why when it names none, or two that differ.
pub(crate) fn request_authority(
    headers: &HeaderMap,
    uri: &axum::http::Uri,
) -> Result<String, String> {
    let host = match headers.get(header::HOST) {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| "refused: the Host header is not text".to_owned())?,
        ),
        None => None,
    };
    match (host, uri.authority().map(|a| a.as_str())) {
        (Some(host), Some(target)) if !host.eq_ignore_ascii_case(target) => Err(format!(
            "refused: the Host header ({}) and the request's target ({}) name different hosts",
            shown(host),
            shown(target)
        )),
        (Some(authority), _) | (None, Some(authority)) => Ok(authority.to_owned()),
        (None, None) => Err("refused: the request names no host (no Host header)".to_owned()),
    }
}

/// The request's host, checked against the served names, for the handlers
/// (the same-origin check of actions compares `Origin` with it).
#[derive(Debug, Clone)]
pub(crate) struct ServedHost(pub(crate) String);

/// Refuses every request whose host the dashboard does not serve: 400 when
/// it names none, 403 (with how to allow it) when it names another.
pub(crate) async fn require_served_host(
    State(hosts): State<Arc<Hosts>>,
    mut request: Request,
    next: Next,
) -> Response {
    let authority = match request_authority(request.headers(), request.uri()) {
        Ok(authority) => authority,
        Err(why) => return refused(StatusCode::BAD_REQUEST, why),
    };
    let Some(host) = host_name(&authority) else {
        return refused(
            StatusCode::BAD_REQUEST,
            format!("refused: `{}` is not a host name", shown(&authority)),
        );
    };
    if !hosts.serves(&host) {
        let host = shown(&host);
        return refused(
            StatusCode::FORBIDDEN,
            format!(
                "refused: this dashboard does not serve the host `{host}` (a page whose name \
                 was re-pointed at this address could otherwise read and steer it: DNS \
                 rebinding). If `{host}` is a name of yours for this server, allow it: \
                 `jobq web --allow-host {host}`, or Dashboard::allow_host(\"{host}\")"
            ),
        );
    }
    request.extensions_mut().insert(ServedHost(authority));
    next.run(request).await
}

/// At most 100 characters of what a request named, to quote it.
fn shown(text: &str) -> String {
    text.chars().take(100).collect()
}

fn refused(status: StatusCode, message: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        message + "\n",
    )
        .into_response()
}

/// Why a state-changing request is refused, if it is. `host` is the
/// authority the request was sent to, which [`require_served_host`] checked.
pub(crate) fn refusal(
    headers: &HeaderMap,
    host: &str,
    expected: &str,
    token: Option<&str>,
) -> Option<String> {
    if let Some(origin) = cross_origin(headers, host) {
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
fn cross_origin(headers: &HeaderMap, host: &str) -> Option<String> {
    let named = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok())?;
    let authority = named
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default());
    match authority {
        Some(authority) if authority.eq_ignore_ascii_case(host) => None,
        _ => Some(shown(named)),
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
        let host = "127.0.0.1:8080";
        let same_site = headers(&[(header::ORIGIN, "http://127.0.0.1:8080")]);
        assert_eq!(refusal(&same_site, host, "t", Some("t")), None);
        let other = headers(&[(header::ORIGIN, "https://evil.example")]);
        assert!(
            refusal(&other, host, "t", Some("t"))
                .unwrap()
                .contains("another site")
        );
        let referer = headers(&[(header::REFERER, "http://evil.example/127.0.0.1:8080")]);
        assert!(refusal(&referer, host, "t", Some("t")).is_some());
        let null = headers(&[(header::ORIGIN, "null")]);
        assert!(refusal(&null, "h", "t", Some("t")).is_some());
        let other_port = headers(&[(header::ORIGIN, "http://127.0.0.1:9999")]);
        assert!(refusal(&other_port, host, "t", Some("t")).is_some());
    }

    #[test]
    fn a_missing_or_wrong_token_is_refused() {
        let plain = headers(&[]);
        assert!(
            refusal(&plain, "h", "t", None)
                .unwrap()
                .contains("no form token")
        );
        assert!(
            refusal(&plain, "h", "t", Some("u"))
                .unwrap()
                .contains("not this")
        );
        assert_eq!(refusal(&plain, "h", "t", Some("t")), None);
        assert_eq!(new_token().len(), 32);
        assert_ne!(new_token(), new_token());
    }

    #[test]
    fn localhost_ip_addresses_and_allowed_names_are_served_and_nothing_else() {
        let mut hosts = Hosts::default();
        let serves = |hosts: &Hosts, authority: &str| {
            host_name(authority).is_some_and(|host| hosts.serves(&host))
        };
        for served in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.:8080",
            "app.localhost:3000",
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[fe80::1]",
        ] {
            assert!(serves(&hosts, served), "{served}");
        }
        for refused in [
            "rebind.attacker.example:8080",
            "localhost.attacker.example",
            "notlocalhost",
            "jobs.example.com",
            "127.0.0.1.nip.io",
            "user@localhost",
            "",
        ] {
            assert!(!serves(&hosts, refused), "{refused}");
        }
        hosts.allow("Jobs.Example.com:8443");
        hosts.allow(".ops.example");
        for served in [
            "jobs.example.com",
            "jobs.example.com.:80",
            "ops.example",
            "a.b.ops.example",
        ] {
            assert!(serves(&hosts, served), "{served}");
        }
        for refused in ["www.jobs.example.com", "evilops.example", "example.com"] {
            assert!(!serves(&hosts, refused), "{refused}");
        }
        hosts.allow("*");
        assert!(serves(&hosts, "anything.example"));
    }

    #[test]
    fn a_request_names_its_host_by_header_or_target_never_two() {
        let uri = |s: &str| s.parse::<axum::http::Uri>().unwrap();
        let host = headers(&[(header::HOST, "localhost:8080")]);
        assert_eq!(
            request_authority(&host, &uri("/queues")).as_deref(),
            Ok("localhost:8080")
        );
        // HTTP/2: no Host header, the target's authority.
        assert_eq!(
            request_authority(&headers(&[]), &uri("http://127.0.0.1:8080/queues")).as_deref(),
            Ok("127.0.0.1:8080")
        );
        assert!(
            request_authority(&host, &uri("http://rebind.attacker.example/queues"))
                .unwrap_err()
                .contains("different hosts")
        );
        assert!(
            request_authority(&headers(&[]), &uri("/queues"))
                .unwrap_err()
                .contains("names no host")
        );
    }
}
