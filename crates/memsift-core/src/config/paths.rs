//! Where memsift keeps its files when the configuration names no place.

use std::path::PathBuf;

/// The directory for the default SQLite file and the demo database.
///
/// systemd's `$STATE_DIRECTORY` first, then `$XDG_DATA_HOME/memsift`, then `~/.local/share/memsift`,
/// then `./.memsift` when no home is known.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STATE_DIRECTORY").filter(|dir| !dir.is_empty()) {
        // systemd may pass several colon-separated directories; the first is ours.
        let first = dir.to_string_lossy().split(':').next().unwrap_or_default().to_owned();
        return PathBuf::from(first);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir).join("memsift");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        return PathBuf::from(home).join(".local/share/memsift");
    }
    PathBuf::from(".memsift")
}
