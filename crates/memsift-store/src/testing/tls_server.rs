//! A PostgreSQL server of one test's own, with TLS on (a certificate the test made) or off, for
//! the tests of TLS to PostgreSQL; stopped and removed when dropped.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::{Programs, free_port, output, postgres_bin_dir};

/// A running throwaway PostgreSQL cluster.
pub struct TlsServer {
    programs: Programs,
    data: PathBuf,
    port: u16,
    // Declared last so the directory outlives the server stopped in `drop`.
    _dir: tempfile::TempDir,
}

impl TlsServer {
    /// Starts a cluster in a temporary directory, trust auth on 127.0.0.1. With `identity`
    /// (the server's certificate chain and its private key, both PEM) it serves TLS; without,
    /// it answers a TLS request with "no", as a server with `ssl = off` does.
    pub fn start(identity: Option<(&str, &str)>) -> Result<TlsServer, String> {
        let bin = postgres_bin_dir()
            .ok_or("the TLS tests need PostgreSQL's server programs (Debian: apt-get install postgresql)")?;
        let programs = Programs::find(bin)?;
        let dir = tempfile::Builder::new()
            .prefix("memsift-tls-pg-")
            .tempdir()
            .map_err(|error| error.to_string())?;
        let data = dir.path().join("data");
        programs.hand_over(dir.path())?;
        programs.initdb(&data)?;
        let port = free_port()?;
        let mut settings = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        match identity {
            Some((certificate, key)) => {
                let write = |name: &str, text: &str| -> Result<PathBuf, String> {
                    let path = dir.path().join(name);
                    std::fs::write(&path, text).map_err(|error| error.to_string())?;
                    // The server refuses a key others can read.
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                        .map_err(|error| error.to_string())?;
                    Ok(path)
                };
                let certificate = write("server.crt", certificate)?;
                let key = write("server.key", key)?;
                programs.hand_over(dir.path())?;
                settings.push_str(&format!(
                    " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                    certificate.display(),
                    key.display()
                ));
            }
            None => settings.push_str(" -c ssl=off"),
        }
        output(
            programs
                .command("pg_ctl")
                .args(["-w", "-D"])
                .arg(&data)
                .arg("-l")
                .arg(dir.path().join("server.log"))
                .args(["-o", &settings, "start"]),
        )?;
        Ok(TlsServer {
            programs,
            data,
            port,
            _dir: dir,
        })
    }

    /// The admin URL of the server reached as `host` (which the certificate may or may not
    /// name), with `query` (`sslmode=…&sslrootcert=…`) appended.
    pub fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _stopped = self
            .programs
            .command("pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(&self.data)
            .arg("stop")
            .output();
    }
}
