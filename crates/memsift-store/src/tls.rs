//! TLS to PostgreSQL: `sslmode` and `sslrootcert` read as libpq reads them, a refused handshake
//! named in one line with its fix, and whether the session the store opened is encrypted.

use std::fmt;
use std::path::PathBuf;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::StoreError;

/// How far a connection insists on TLS: libpq's `sslmode`, whose names it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text only.
    Disable,
    /// Plain text; TLS only when the server insists (memsift's driver treats it as `disable`,
    /// and says so: see [`TlsSettings::describe`]).
    Allow,
    /// TLS when the server offers it, else plain text (libpq's and memsift's default).
    Prefer,
    /// TLS or nothing; the certificate is not checked.
    Require,
    /// TLS, and the certificate is signed by a trusted CA.
    VerifyCa,
    /// TLS, a trusted CA, and the certificate names the host connected to.
    VerifyFull,
}

impl TlsMode {
    const ALL: [(&'static str, TlsMode); 6] = [
        ("disable", TlsMode::Disable),
        ("allow", TlsMode::Allow),
        ("prefer", TlsMode::Prefer),
        ("require", TlsMode::Require),
        ("verify-ca", TlsMode::VerifyCa),
        ("verify-full", TlsMode::VerifyFull),
    ];

    fn parse(text: &str) -> Option<TlsMode> {
        let folded = text.trim().to_ascii_lowercase();
        TlsMode::ALL
            .iter()
            .find(|(name, _)| *name == folded)
            .map(|(_, mode)| *mode)
    }

    /// The `sslmode` value.
    pub fn name(self) -> &'static str {
        TlsMode::ALL
            .iter()
            .find(|(_, mode)| *mode == self)
            .map_or("prefer", |(name, _)| name)
    }

    /// Whether a session in this mode may end up in plain text.
    pub fn allows_plain_text(self) -> bool {
        matches!(self, TlsMode::Disable | TlsMode::Allow | TlsMode::Prefer)
    }

    fn driver_mode(self) -> PgSslMode {
        match self {
            TlsMode::Disable => PgSslMode::Disable,
            TlsMode::Allow => PgSslMode::Allow,
            TlsMode::Prefer => PgSslMode::Prefer,
            TlsMode::Require => PgSslMode::Require,
            TlsMode::VerifyCa => PgSslMode::VerifyCa,
            TlsMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }
}

/// Where the mode in force was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingSource {
    /// The URL's `sslmode`.
    Url,
    /// `PGSSLMODE`.
    Environment,
    /// Nothing said: libpq's default.
    Default,
}

/// The TLS settings of a PostgreSQL URL, after libpq's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// The mode in force.
    pub mode: TlsMode,
    /// Where it was read.
    pub source: SettingSource,
    /// The PEM file of CAs to trust (`sslrootcert`, or `PGSSLROOTCERT`).
    pub root_cert: Option<PathBuf>,
}

/// The URL parameters that name the mode and the CA file, in every spelling the driver reads.
const MODE_PARAMETERS: [&str; 2] = ["sslmode", "ssl-mode"];
const ROOT_CERT_PARAMETERS: [&str; 3] = ["sslrootcert", "ssl-root-cert", "ssl-ca"];

impl TlsSettings {
    /// Reads the settings from `url`'s query and, for what it leaves out, from the environment
    /// through `env` (`PGSSLMODE`, `PGSSLROOTCERT`), as libpq does:
    /// - `sslmode` defaults to `prefer`, or to `verify-full` with `sslrootcert=system`;
    /// - `require` with a CA file given checks the CA (`verify-ca`);
    /// - `sslrootcert=system` trusts the operating system's CAs and only with `verify-full`.
    pub fn read(url: &url::Url, env: impl Fn(&str) -> Option<String>) -> Result<TlsSettings, StoreError> {
        let last_of = |names: &[&str]| {
            url.query_pairs()
                .filter(|(name, _)| names.contains(&name.as_ref()))
                .map(|(_, value)| value.into_owned())
                .last()
        };
        let root = last_of(&ROOT_CERT_PARAMETERS).or_else(|| env("PGSSLROOTCERT"));
        let system_roots = root.as_deref() == Some("system");
        let (mode_text, source) = match last_of(&MODE_PARAMETERS) {
            Some(text) => (Some(text), SettingSource::Url),
            None => match env("PGSSLMODE") {
                Some(text) => (Some(text), SettingSource::Environment),
                None => (None, SettingSource::Default),
            },
        };
        let mode = match &mode_text {
            Some(text) => TlsMode::parse(text).ok_or_else(|| {
                invalid(format!(
                    "sslmode `{}` is not one of disable, allow, prefer, require, verify-ca, verify-full; \
                     verify-full is the safe choice for a server across a network",
                    text.trim()
                ))
            })?,
            None if system_roots => TlsMode::VerifyFull,
            None => TlsMode::Prefer,
        };
        if system_roots && mode != TlsMode::VerifyFull {
            return Err(invalid(format!(
                "sslrootcert=system trusts every CA this machine trusts, so it needs sslmode=verify-full (it is {}); \
                 set sslmode=verify-full, or give sslrootcert the file of the one CA that signed the server's certificate",
                mode.name()
            )));
        }
        let root_cert = root.filter(|_| !system_roots).map(PathBuf::from);
        let mode = if mode == TlsMode::Require && root_cert.is_some() {
            TlsMode::VerifyCa
        } else {
            mode
        };
        Ok(TlsSettings {
            mode,
            source,
            root_cert,
        })
    }

    /// [`TlsSettings::read`] of a PostgreSQL URL with this process's environment, as connecting
    /// and `check-config` read it.
    pub(crate) fn of_url(url: &str) -> Result<TlsSettings, StoreError> {
        let parsed = ::url::Url::parse(url).map_err(|error| StoreError::BadUrl {
            url: crate::redact(url),
            reason: error.to_string(),
        })?;
        TlsSettings::read(&parsed, |name| std::env::var(name).ok())
    }

    /// The settings laid on the driver's options: the mode after libpq's rules, and a CA file
    /// that exists and holds a certificate (the driver's own error for a bad file names neither).
    pub(crate) fn apply(&self, options: PgConnectOptions) -> Result<PgConnectOptions, StoreError> {
        let options = options.ssl_mode(self.mode.driver_mode());
        let Some(path) = &self.root_cert else {
            // No CA file: this machine's CAs alone. An empty list also stands in for a
            // `PGSSLROOTCERT=system` the driver read as a file name.
            return Ok(options.ssl_root_cert_from_pem(Vec::new()));
        };
        let fix =
            "give sslrootcert the path of the PEM file holding the certificate of the CA that signed the server's";
        let pem = std::fs::read(path).map_err(|error| {
            invalid(format!(
                "sslrootcert `{}` cannot be read ({error}); {fix}",
                path.display()
            ))
        })?;
        let holds_a_certificate = pem
            .windows(b"-----BEGIN CERTIFICATE-----".len())
            .any(|window| window == b"-----BEGIN CERTIFICATE-----");
        if !holds_a_certificate {
            return Err(invalid(format!(
                "sslrootcert `{}` holds no PEM certificate (no `-----BEGIN CERTIFICATE-----` line); {fix}",
                path.display()
            )));
        }
        Ok(options.ssl_root_cert_from_pem(pem))
    }

    /// The mode in force in a few words, for `check-config` and the start-up log.
    pub fn describe(&self) -> String {
        let from = match self.source {
            SettingSource::Url => "",
            SettingSource::Environment => " (from PGSSLMODE)",
            SettingSource::Default => " (the default)",
        };
        let trusted = match &self.root_cert {
            Some(path) => format!("the CAs in {} and this machine's", path.display()),
            None => "this machine's CAs".to_owned(),
        };
        let what = match self.mode {
            TlsMode::Disable => "plain text: the password and every memory cross the network unencrypted".to_owned(),
            TlsMode::Allow => {
                "plain text (allow is served as disable): set sslmode=verify-full to encrypt and check the server"
                    .to_owned()
            }
            TlsMode::Prefer => {
                "TLS when the server offers it, else plain text (said in the log); set sslmode=verify-full \
                                to insist and check the server"
                    .to_owned()
            }
            TlsMode::Require => "TLS always, the server's certificate not checked".to_owned(),
            // libpq's verify-ca takes any host name; the driver's check of that (sqlx issue 3793)
            // misses rustls's newer name-mismatch error, so the name is checked as well. That
            // fails closed, and is said rather than worked around.
            TlsMode::VerifyCa => format!(
                "TLS always, the certificate signed by {trusted} and, in this build, naming the host (sqlx issue 3793)"
            ),
            TlsMode::VerifyFull => format!("TLS always, the certificate signed by {trusted} and naming the host"),
        };
        format!("TLS sslmode={}{from}: {what}", self.mode.name())
    }
}

/// The TLS settings a connection to `url` would use, checked as connecting checks them (the CA
/// file read), without connecting; `None` for a URL that is not PostgreSQL's.
pub fn check_database_tls(url: &str) -> Result<Option<TlsSettings>, StoreError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Ok(None);
    }
    let settings = TlsSettings::of_url(url)?;
    settings.apply(PgConnectOptions::new())?;
    Ok(Some(settings))
}

fn invalid(reason: String) -> StoreError {
    StoreError::Invalid(format!("database URL: {reason}"))
}

/// Whether the session a store opened is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// SQLite: a file on this machine, nothing on the network.
    LocalFile,
    /// PostgreSQL over a Unix socket (the driver does not encrypt those, nor does libpq).
    UnixSocket,
    /// PostgreSQL over TLS.
    Encrypted,
    /// PostgreSQL in plain text over TCP.
    PlainText,
    /// PostgreSQL, and the server did not say whether the session is encrypted.
    Undetermined,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::LocalFile => "a local SQLite file",
            Transport::UnixSocket => "a Unix socket",
            Transport::Encrypted => "TLS",
            Transport::PlainText => "plain text",
            Transport::Undetermined => "TLS or plain text (the server's pg_stat_ssl did not say)",
        })
    }
}

/// The warning a session owes its operator: plain text over TCP that the settings let happen
/// (`prefer` falling back, or `disable`/`allow` chosen), said once per process.
pub fn plain_text_warning(settings: &TlsSettings, transport: Transport, host: &str) -> Option<String> {
    if transport != Transport::PlainText {
        return None;
    }
    let (why, fix) = match settings.mode {
        TlsMode::Prefer => (
            "sslmode=prefer fell back to plain text: the server does not offer TLS".to_owned(),
            "turn on `ssl` in the server's postgresql.conf, then set sslmode=verify-full in the database URL",
        ),
        TlsMode::Disable | TlsMode::Allow => (
            format!("sslmode={} asks for plain text", settings.mode.name()),
            "set sslmode=verify-full in the database URL (the server needs `ssl` on)",
        ),
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => return None,
    };
    Some(format!(
        "PostgreSQL at {host}: {why}; the password and every memory cross the network unencrypted: {fix}"
    ))
}

/// A connection refused for a TLS reason, as one line with its fix; `None` for other failures.
pub(crate) fn describe_refusal(error: &sqlx::Error, settings: &TlsSettings, host: &str) -> Option<String> {
    if let sqlx::Error::Tls(inner) = error
        && inner.to_string().contains("does not support TLS")
    {
        return Some(format!(
            "the server at {host} does not offer TLS and sslmode={} refuses plain text: turn on `ssl` in the server's \
             postgresql.conf (ssl = on, with ssl_cert_file and ssl_key_file)",
            settings.mode.name()
        ));
    }
    let refusal = rustls_error(error)?;
    let trusted = match &settings.root_cert {
        Some(path) => format!("{} and this machine's CAs", path.display()),
        None => "this machine's CAs (no sslrootcert given)".to_owned(),
    };
    use rustls::CertificateError as Cert;
    Some(match refusal {
        rustls::Error::InvalidCertificate(cause) => match cause {
            Cert::UnknownIssuer | Cert::BadSignature | Cert::UnhandledCriticalExtension | Cert::InvalidPurpose => {
                format!(
                    "the certificate of the server at {host} is not signed by a CA this daemon trusts ({refusal}; trusted: \
                     {trusted}): set sslrootcert=PATH in the database URL to the PEM file of the CA that signed it"
                )
            }
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } if settings.mode == TlsMode::VerifyCa => {
                format!(
                    "the certificate of the server does not name the host `{host}` ({refusal}), and this build checks the \
                 name under sslmode=verify-ca too (a driver bug, sqlx issue 3793, fixed in sqlx 0.9): connect by a \
                 name the certificate holds"
                )
            }
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } => format!(
                "the certificate of the server does not name the host `{host}` ({refusal}): connect by a name the \
                 certificate holds"
            ),
            Cert::Expired | Cert::ExpiredContext { .. } | Cert::NotValidYet | Cert::NotValidYetContext { .. } => {
                format!(
                    "the certificate of the server at {host} is outside its validity dates ({refusal}): renew it on the \
                     server, or check this machine's clock"
                )
            }
            _ => format!("the certificate of the server at {host} was refused ({refusal})"),
        },
        other => format!("the TLS handshake with the server at {host} failed ({other})"),
    })
}

/// The rustls error behind a driver error: a `Tls` error holds it, an `Io` error wraps it (the
/// handshake runs through `std::io`, whose `source()` skips the wrapped error itself).
fn rustls_error(error: &sqlx::Error) -> Option<&rustls::Error> {
    match error {
        sqlx::Error::Tls(inner) => inner.downcast_ref::<rustls::Error>(),
        sqlx::Error::Io(io) => io.get_ref()?.downcast_ref::<rustls::Error>(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(url: &str, env: &[(&str, &str)]) -> Result<TlsSettings, StoreError> {
        let url = url::Url::parse(url).expect("test URL parses");
        TlsSettings::read(&url, |name| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn nothing_said_is_prefer_as_in_libpq() {
        let settings = read("postgres://u@db/x", &[]).unwrap();
        assert_eq!(
            (settings.mode, settings.source, settings.root_cert),
            (TlsMode::Prefer, SettingSource::Default, None)
        );
    }

    #[test]
    fn the_url_wins_over_the_environment_and_the_environment_over_the_default() {
        let from_url = read("postgres://u@db/x?sslmode=verify-full", &[("PGSSLMODE", "disable")]).unwrap();
        assert_eq!(
            (from_url.mode, from_url.source),
            (TlsMode::VerifyFull, SettingSource::Url)
        );
        let from_env = read("postgres://u@db/x", &[("PGSSLMODE", "require")]).unwrap();
        assert_eq!(
            (from_env.mode, from_env.source),
            (TlsMode::Require, SettingSource::Environment)
        );
        let spelled = read("postgres://u@db/x?ssl-mode=Verify-CA", &[]).unwrap();
        assert_eq!(spelled.mode, TlsMode::VerifyCa);
    }

    #[test]
    fn require_with_a_ca_file_checks_the_ca_as_libpq_does() {
        let settings = read("postgres://u@db/x?sslmode=require&sslrootcert=/etc/ca.pem", &[]).unwrap();
        assert_eq!(settings.mode, TlsMode::VerifyCa);
        let from_env = read("postgres://u@db/x?sslmode=require", &[("PGSSLROOTCERT", "/etc/ca.pem")]).unwrap();
        assert_eq!(
            (from_env.mode, from_env.root_cert),
            (TlsMode::VerifyCa, Some(PathBuf::from("/etc/ca.pem")))
        );
    }

    #[test]
    fn system_roots_mean_verify_full_and_refuse_a_weaker_mode() {
        let settings = read("postgres://u@db/x?sslrootcert=system", &[]).unwrap();
        assert_eq!((settings.mode, settings.root_cert), (TlsMode::VerifyFull, None));
        let error = read("postgres://u@db/x?sslrootcert=system&sslmode=require", &[]).unwrap_err();
        assert!(error.to_string().contains("needs sslmode=verify-full"), "{error}");
    }

    proptest::proptest! {
        /// Any bytes in either setting: a mode libpq knows is read as that mode (with libpq's
        /// rules on top), anything else refused in one line naming the setting; never a panic.
        #[test]
        fn any_setting_is_read_as_libpq_reads_it_or_refused_in_one_line(
            mode in proptest::option::of("\\PC{0,12}|(?i:disable|allow|prefer|require|verify-ca|verify-full)"),
            root in proptest::option::of("\\PC{0,12}|system|/etc/ca\\.pem"),
        ) {
            let mut url = url::Url::parse("postgres://u@db/x").unwrap();
            {
                let mut query = url.query_pairs_mut();
                if let Some(mode) = &mode { query.append_pair("sslmode", mode); }
                if let Some(root) = &root { query.append_pair("sslrootcert", root); }
            }
            let known = mode.as_deref().map(TlsMode::parse);
            let system = root.as_deref() == Some("system");
            match TlsSettings::read(&url, |_| None) {
                Ok(settings) => {
                    let asked = match known {
                        Some(Some(mode)) => mode,
                        Some(None) => panic!("{mode:?} was taken"),
                        None if system => TlsMode::VerifyFull,
                        None => TlsMode::Prefer,
                    };
                    let has_file = root.is_some() && !system;
                    let expected = if asked == TlsMode::Require && has_file { TlsMode::VerifyCa } else { asked };
                    proptest::prop_assert_eq!(settings.mode, expected);
                    proptest::prop_assert_eq!(settings.root_cert.is_some(), has_file);
                    proptest::prop_assert!(!system || settings.mode == TlsMode::VerifyFull);
                }
                Err(error) => {
                    let line = error.to_string();
                    proptest::prop_assert!(!line.contains('\n'), "{}", line);
                    proptest::prop_assert!(
                        matches!(known, Some(None)) || (system && known.flatten() != Some(TlsMode::VerifyFull)),
                        "refused a valid setting: {}", line
                    );
                    proptest::prop_assert!(line.contains("sslmode") || line.contains("sslrootcert"), "{}", line);
                }
            }
        }
    }

    #[test]
    fn an_unknown_mode_is_refused_naming_the_choices() {
        let error = read("postgres://u@db/x?sslmode=on", &[]).unwrap_err().to_string();
        assert!(
            error.contains("sslmode `on`") && error.contains("verify-full"),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    fn only_plain_text_over_tcp_that_the_settings_allowed_is_warned_of() {
        let prefer = read("postgres://u@db/x", &[]).unwrap();
        let warning = plain_text_warning(&prefer, Transport::PlainText, "db:5432").expect("a fallback is said");
        assert!(
            warning.contains("fell back") && warning.contains("verify-full"),
            "{warning}"
        );
        assert_eq!(plain_text_warning(&prefer, Transport::Encrypted, "db:5432"), None);
        assert_eq!(
            plain_text_warning(&prefer, Transport::UnixSocket, "/run/postgresql"),
            None
        );
        let disable = read("postgres://u@db/x?sslmode=disable", &[]).unwrap();
        assert!(plain_text_warning(&disable, Transport::PlainText, "db:5432").is_some());
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let not_pem = dir.path().join("key.pem");
        std::fs::write(&not_pem, "-----BEGIN PRIVATE KEY-----\n").unwrap();
        for path in [&missing, &not_pem] {
            let settings = TlsSettings {
                mode: TlsMode::VerifyFull,
                source: SettingSource::Url,
                root_cert: Some(path.clone()),
            };
            let error = settings.apply(PgConnectOptions::new()).unwrap_err().to_string();
            assert!(
                error.contains(&path.display().to_string()) && error.contains("sslrootcert"),
                "{error}"
            );
        }
    }
}
