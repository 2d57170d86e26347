//! Which names a request's `Host` may give. A page on another site can rebind its own name to 127.0.0.1 and
//! then read whatever a loopback server answers to that name (DNS rebinding); the browser still sends the
//! attacker's name as `Host`. So the server answers only to the address it is bound to, `localhost`, and the
//! names it was told (`--allowed-host`, for a reverse proxy or a machine name).

use std::net::IpAddr;

/// The names a server answers to.
#[derive(Debug, Clone)]
pub struct Hosts {
    bound: IpAddr,
    /// Lowercase, without a port.
    names: Vec<String>,
}

impl Hosts {
    /// A server bound to `bound`, also answering to `names` (host names, with or without a port).
    pub fn new(bound: IpAddr, names: &[String]) -> Hosts {
        let names = names.iter().map(|n| name_of(n)).collect();
        Hosts { bound, names }
    }

    /// Whether a request with this `Host` header is one for this server. A request without one is not.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(name) = host.map(name_of).filter(|n| !n.is_empty()) else {
            return false;
        };
        if name == "localhost" || self.names.contains(&name) {
            return true;
        }
        // An address is never a rebound name: the browser was pointed at the address itself.
        match name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(ip) => {
                self.bound.is_unspecified()
                    || ip == self.bound
                    || (ip.is_loopback() && self.bound.is_loopback())
            }
            Err(_) => false,
        }
    }

    /// What the refusal says the server answers to.
    pub fn describe(&self) -> String {
        let mut names = vec![self.bound.to_string(), "localhost".to_string()];
        names.extend(self.names.iter().cloned());
        names.join(", ")
    }
}

/// A `Host` value's name: lowercase, without its port or a trailing dot.
fn name_of(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.strip_prefix('[') {
        Some(rest) => format!("[{}]", rest.split(']').next().unwrap_or("")),
        None => host.split(':').next().unwrap_or("").to_string(),
    };
    name.trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bound_address_localhost_and_named_hosts_are_answered() {
        let loopback = Hosts::new(
            "127.0.0.1".parse().unwrap(),
            &["Lab-Box.example:8686".into()],
        );
        for ok in [
            "127.0.0.1:8686",
            "127.0.0.1",
            "localhost:8686",
            "LOCALHOST.",
            "[::1]:8686",
            "lab-box.example",
        ] {
            assert!(loopback.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example:8686",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "10.0.0.5:8686",
            "",
        ] {
            assert!(!loopback.allows(Some(refused)), "{refused}");
        }
        assert!(!loopback.allows(None));
        let everywhere = Hosts::new("0.0.0.0".parse().unwrap(), &[]);
        assert!(everywhere.allows(Some("10.0.0.5:8686")));
        assert!(!everywhere.allows(Some("evil.example")));
    }
}
