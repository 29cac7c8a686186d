//! Reading an input file with a bound, so a device or a huge file is one error, not a stall.
//!
//! Every file memsift is handed (configuration, import, evaluation, token, key) goes through
//! [`read_at_most`]: `/dev/zero` or a 3 GB file named by mistake is refused after at most `limit`
//! bytes (a regular file larger than that before a byte is read), never read whole into memory.

use std::io::Read;
use std::path::Path;

/// Why [`read_at_most`] returned no bytes.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file holds more than the limit.
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The limit it is over.
        limit: u64,
    },
}

/// `path` opened for reading, refused when it is a regular file larger than `limit`: a regular
/// file says its size, so a big one is refused before any of it is read; a device or a pipe does
/// not, and its reader must count what it reads.
pub fn open_at_most(path: &Path, limit: u64) -> Result<std::fs::File, BoundedReadError> {
    let file = std::fs::File::open(path)?;
    if let Ok(metadata) = file.metadata()
        && metadata.is_file()
        && metadata.len() > limit
    {
        return Err(BoundedReadError::TooLarge { limit });
    }
    Ok(file)
}

/// The bytes of `path`, refused when they are more than `limit` (a device is read up to one byte
/// past it).
pub fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, BoundedReadError> {
    let file = open_at_most(path, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(BoundedReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// The most a file holding one secret (an API key, the API token) is read: a line of text.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;

/// [`read_at_most`] as UTF-8 text, for small files whose error is an I/O error with its reason
/// ("larger than N bytes", "not UTF-8") rather than a variant of its own.
pub fn read_text_at_most(path: &Path, limit: u64) -> std::io::Result<String> {
    let bytes = read_at_most(path, limit).map_err(|error| match error {
        BoundedReadError::Io(error) => error,
        too_large @ BoundedReadError::TooLarge { .. } => {
            std::io::Error::new(std::io::ErrorKind::InvalidData, too_large.to_string())
        }
    })?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_limit_is_read_whole_and_one_past_it_is_refused() {
        let path = std::env::temp_dir().join(format!("memsift-read-at-most-{}", std::process::id()));
        std::fs::write(&path, b"12345").unwrap();
        let (whole, over) = (read_at_most(&path, 5), read_at_most(&path, 4));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(whole.unwrap(), b"12345");
        assert!(matches!(over, Err(BoundedReadError::TooLarge { limit: 4 })));
    }

    #[test]
    fn an_endless_device_is_refused_after_the_limit() {
        assert!(matches!(
            read_at_most(Path::new("/dev/zero"), 1 << 16),
            Err(BoundedReadError::TooLarge { limit: 65536 })
        ));
    }
}
