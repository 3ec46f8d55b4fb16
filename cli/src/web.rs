//! `jobq web`: the dashboard of `jobq-web` on its own listener.

use std::net::{IpAddr, SocketAddr};

use jobq_runtime::Jobq;
use tokio::net::TcpListener;

use crate::Outcome;

/// The variable the basic-authentication password comes from (never a flag:
/// a flag shows in `ps`).
pub(crate) const PASSWORD_VAR: &str = "JOBQ_WEB_PASSWORD";

/// Serves the dashboard on `listen` until Ctrl-C or SIGTERM.
pub(crate) async fn serve(
    jobq: Jobq,
    listen: SocketAddr,
    read_only: bool,
    user: String,
    allow_hosts: Vec<String>,
) -> Result<Outcome, String> {
    let password = std::env::var(PASSWORD_VAR).ok().filter(|p| !p.is_empty());
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the address listened on: {e}"))?;
    if let Some(warning) = exposure_warning(bound.ip(), password.is_some(), read_only) {
        errln!("jobq: warning: {warning}");
    }
    let mut dashboard = jobq_web::Dashboard::new(jobq).read_only(read_only);
    let mut notes = Vec::new();
    let allow_hosts: Vec<&str> = allow_hosts
        .iter()
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .collect();
    for host in &allow_hosts {
        dashboard = dashboard.allow_host(host);
    }
    if !allow_hosts.is_empty() {
        notes.push(format!("also serving {}", allow_hosts.join(", ")));
    } else if !bound.ip().is_loopback() {
        errln!(
            "jobq: it answers requests sent to an IP address or localhost; to reach it by a host name, add --allow-host NAME"
        );
    }
    if read_only {
        notes.push("read-only".to_owned());
    }
    if let Some(password) = password {
        notes.push(format!("basic auth as `{user}`"));
        dashboard = dashboard.basic_auth(user, password);
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join(", "))
    };
    outln!("jobq: dashboard on http://{bound}/{notes}; Ctrl-C stops it");
    axum::serve(listener, dashboard.router())
        .with_graceful_shutdown(stop_signal())
        .await
        .map_err(|e| format!("the dashboard's server failed: {e}"))?;
    Ok(Outcome::Done)
}

/// What to warn about when the dashboard is reachable beyond this machine
/// with no password: `None` on a loopback address or with authentication.
pub(crate) fn exposure_warning(ip: IpAddr, authenticated: bool, read_only: bool) -> Option<String> {
    if ip.is_loopback() || authenticated {
        return None;
    }
    let can = if read_only {
        "see every job's payload and error"
    } else {
        "see every job's payload and error, and retry, cancel and pause jobs"
    };
    Some(format!(
        "listening on {ip}, which is not a loopback address, without a password: anyone who can reach it can {can}; set {PASSWORD_VAR} (basic auth) or listen on 127.0.0.1"
    ))
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_non_loopback_address_without_a_password_is_warned_about() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(exposure_warning(ip("127.0.0.1"), false, false), None);
        assert_eq!(exposure_warning(ip("::1"), false, false), None);
        assert_eq!(exposure_warning(ip("0.0.0.0"), true, false), None);
        let warning = exposure_warning(ip("0.0.0.0"), false, false).unwrap();
        assert!(
            warning.contains("0.0.0.0") && warning.contains(PASSWORD_VAR),
            "{warning}"
        );
        assert!(warning.contains("retry, cancel and pause"), "{warning}");
        let read_only = exposure_warning(ip("10.1.2.3"), false, true).unwrap();
        assert!(!read_only.contains("retry"), "{read_only}");
    }
}
