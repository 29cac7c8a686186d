//! Redaction of URLs before they are shown: database URLs and provider endpoints lose their
//! passwords and password-like query parameters in every message, log line and listing.
//!
//! A URL is read with the grammar of the driver that will read it, so what is hidden is exactly
//! what that driver would take as the secret: `sqlite:` URLs are a path and form-encoded
//! parameters (sqlx splits at the first `?`), everything else is a WHATWG URL (the `url` crate,
//! which sqlx's PostgreSQL driver and reqwest use). A URL whose reading is ambiguous, an `@`
//! after the host (a password holding an unescaped `/`, `?` or `#`), is hidden whole: which part
//! is the password cannot be told, so none of it is shown. Query parameters are shown only when
//! their names are known: an unknown one may be the tail of a password holding a raw `&`.

use url::Url;

/// What a hidden value is replaced by.
pub const MASK: &str = "***";

/// Query-parameter names whose values are secrets, matched as substrings of the lowercased name
/// with `-` and `_` removed: `password`, `sslpassword`, `token`, `access_token`, `key`, `api-key`,
/// `secret`, `auth`, `sig`….
const SECRET_NAME_PARTS: [&str; 8] = ["pass", "pwd", "secret", "token", "key", "auth", "credential", "sig"];

/// Parameters whose names (and, unless secret, values) are shown: libpq's keywords, sqlx's
/// spellings, SQLite's, and the API version some endpoints take. Any other name may be the tail of
/// a password holding a raw `&` (`?password=abc&def` reads as `password=abc` and `def`), so
/// it is shown as `***=***`.
const KNOWN_PARAMETERS: [&str; 56] = [
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "require_auth",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "requiressl",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslkeylogfile",
    "sslpassword",
    "sslcertmode",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "target_session_attrs",
    "load_balance_hosts",
    "ssl-mode",
    "ssl-root-cert",
    "ssl-ca",
    "ssl-cert",
    "ssl-key",
    "statement-cache-capacity",
    "mode",
    "cache",
    "immutable",
    "vfs",
    "api-version",
    "api_version",
    "model",
];

/// Whether a query parameter called `name` is one a driver or endpoint is known to read.
pub fn is_known_parameter(name: &str) -> bool {
    KNOWN_PARAMETERS.contains(&name) || name.starts_with("options[") && name.ends_with(']')
}

/// A parameter's name as it may be shown: a known name as it is, any other `***`, password-like
/// ones too (`?password=&key9` reads as an empty password and a parameter named by the rest of it).
pub fn shown_parameter_name(name: &str) -> &str {
    if is_known_parameter(name) { name } else { MASK }
}

/// A parameter as it may be shown: a known name with its value, a password-like name with its
/// value hidden, and anything else hidden whole.
fn shown_parameter<'a>(name: &'a str, value: &'a str) -> (&'a str, &'a str) {
    let value = if is_known_parameter(name) && !is_secret_parameter(name) {
        value
    } else {
        MASK
    };
    (shown_parameter_name(name), value)
}

/// Whether a query parameter called `name` holds a secret.
pub fn is_secret_parameter(name: &str) -> bool {
    let folded: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_NAME_PARTS.iter().any(|part| folded.contains(part))
}

/// `url` with its password and every password-like query value replaced by `***`; the user,
/// host, port, path and other parameters stay, so the operator can still see where it points.
pub fn redact_url(url: &str) -> String {
    if let Some(rest) = url.strip_prefix("sqlite:") {
        return redact_sqlite(rest);
    }
    match Url::parse(url) {
        Ok(parsed) if !has_stray_at_sign(&parsed) => redact_parsed(parsed),
        _ => hidden_whole(url),
    }
}

/// Why a URL cannot be shown or used as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnclearUrl {
    /// The URL does not parse; a password holding `/`, `?` or `#` usually causes it.
    #[error(
        "URL `{shown}` does not parse ({reason}); percent-encode `@ : / ? #` and `%` in the password (`@` is %40, `/` is %2F)"
    )]
    Unparseable {
        /// The redacted URL.
        shown: String,
        /// The parser's reason (never part of the URL).
        reason: String,
    },
    /// An `@` after the host: the password holds an unescaped `/`, `?` or `#`, or a parameter an `@`.
    #[error(
        "URL `{shown}` has an `@` after its host, so which part is the password is unclear; percent-encode `@ / ? #` in the password and parameters (`@` is %40, `/` is %2F)"
    )]
    StrayAtSign {
        /// The redacted URL.
        shown: String,
    },
}

/// Checks that a WHATWG URL (not `sqlite:`) reads one way only, so that no part of a password
/// can end up as a host, path or parameter that a driver names in its own error messages.
pub fn check_unambiguous(url: &str) -> Result<(), UnclearUrl> {
    if url.starts_with("sqlite:") {
        return Ok(());
    }
    match Url::parse(url) {
        Err(error) => Err(UnclearUrl::Unparseable {
            shown: hidden_whole(url),
            reason: error.to_string(),
        }),
        Ok(parsed) if has_stray_at_sign(&parsed) => Err(UnclearUrl::StrayAtSign {
            shown: hidden_whole(url),
        }),
        Ok(_) => Ok(()),
    }
}

/// An `@` past the authority means the authority ended early: the user wrote a password with a
/// `/`, `?` or `#` in it, and the parser took part of it for a host, path or query.
fn has_stray_at_sign(parsed: &Url) -> bool {
    parsed.path().contains('@')
        || parsed.query().is_some_and(|query| query.contains('@'))
        || parsed.fragment().is_some_and(|fragment| fragment.contains('@'))
}

fn redact_parsed(mut parsed: Url) -> String {
    if parsed.password().is_some() {
        // Only fails for URLs that cannot have a password, and this one has one.
        let _ = parsed.set_password(Some(MASK));
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
        let shown = pairs.iter().map(|(name, value)| shown_parameter(name, value));
        parsed.query_pairs_mut().clear().extend_pairs(shown);
    }
    if parsed.fragment().is_some() {
        parsed.set_fragment(Some(MASK));
    }
    parsed.to_string()
}

/// sqlx reads `sqlite:[//]PATH[?PARAMS]`: the path up to the first `?`, then form-encoded pairs.
fn redact_sqlite(rest: &str) -> String {
    let Some((path, params)) = rest.split_once('?') else {
        return format!("sqlite:{rest}");
    };
    let pairs: Vec<_> = url::form_urlencoded::parse(params.as_bytes()).collect();
    let params = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().map(|(name, value)| shown_parameter(name, value)))
        .finish();
    format!("sqlite:{path}?{params}")
}

/// Only the scheme survives (when it is one): the rest may be a password.
fn hidden_whole(url: &str) -> String {
    let scheme = url.split_once(':').map(|(scheme, _)| scheme).filter(|scheme| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    match scheme {
        Some(scheme) => format!("{scheme}://{MASK}"),
        None => MASK.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secret_parameters_are_masked_and_the_rest_kept() {
        for (url, shown) in [
            (
                "postgres://memsift:hunter2@db/memsift",
                "postgres://memsift:***@db/memsift",
            ),
            ("postgres://memsift@db/memsift", "postgres://memsift@db/memsift"),
            (
                "postgres://memsift:p@ss@db:5433/memsift",
                "postgres://memsift:***@db:5433/memsift",
            ),
            (
                "postgresql://db/memsift?sslmode=require&password=hunter2&application_name=memsift",
                "postgresql://db/memsift?sslmode=require&password=***&application_name=memsift",
            ),
            (
                "postgres://u@db/m?sslpassword=a%26b&Api-Key=k&access_token=t",
                "postgres://u@db/m?sslpassword=***&***=***&***=***",
            ),
            // A raw `&` in a password makes its tail a parameter name, here a password-like one.
            (
                "postgres://a@db/m?password=&QKEYA0A0",
                "postgres://a@db/m?password=***&***=***",
            ),
            (
                "postgres://u@db/m?password=abc&def&connect_timeout=5",
                "postgres://u@db/m?password=***&***=***&connect_timeout=5",
            ),
            (
                "https://api.example.com/v1?api-version=2024-10-21&key=abc#frag",
                "https://api.example.com/v1?api-version=2024-10-21&***=***#***",
            ),
            (
                "sqlite:///var/lib/memsift/memsift.db",
                "sqlite:///var/lib/memsift/memsift.db",
            ),
            ("sqlite::memory:", "sqlite::memory:"),
            (
                "sqlite://m@x.db?mode=rwc&key=hunter2",
                "sqlite://m@x.db?mode=rwc&***=***",
            ),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn an_at_sign_after_the_host_hides_the_whole_url_and_is_refused() {
        for url in [
            "postgres://u:ab/cd@db/memsift",
            "postgres://u:12/cd@db/memsift",
            "postgres://u:12?sslmode=cd@db/memsift",
            "postgres://u:12#cd@db/memsift",
        ] {
            assert_eq!(redact_url(url), "postgres://***", "{url}");
            let refused = check_unambiguous(url).unwrap_err().to_string();
            assert!(!refused.contains("cd"), "{refused}");
            assert!(refused.contains("%40"), "the line says how to fix it: {refused}");
        }
        assert_eq!(redact_url("not a url: hunter2"), MASK);
        assert!(check_unambiguous("postgres://u:p%2Fw@db/m").is_ok());
        assert!(check_unambiguous("sqlite://data/m@x.db").is_ok());
    }

    #[test]
    fn secret_parameter_names_are_recognised_in_any_spelling() {
        for name in [
            "password",
            "sslpassword",
            "PASSWORD",
            "token",
            "access_token",
            "key",
            "api-key",
            "secret",
            "sig",
        ] {
            assert!(is_secret_parameter(name), "{name}");
        }
        for name in [
            "sslmode",
            "application_name",
            "host",
            "port",
            "dbname",
            "user",
            "options",
            "mode",
        ] {
            assert!(!is_secret_parameter(name), "{name}");
        }
    }
}
