//! Reading an import or evaluation file with bounds: a JSONL file a line at a time, each line and
//! the file capped, a JSON file capped, so a device or a huge file named by mistake is one error.

use std::path::Path;

use memsift_core::files::BoundedReadError;
use memsift_core::message::NewMessage;

use crate::{ImportError, ImportFormat, parse_jsonl_line, parse_locomo};

/// The largest JSONL file imported: an import is stored in one transaction, so it is held in
/// memory whole; a larger file is refused (before a byte is read when the file says its size),
/// and split files import the same, since a re-import adds nothing.
pub const MAX_JSONL_FILE_BYTES: u64 = 1 << 30;

/// The largest JSON file (LoCoMo, an evaluation file) read: LoCoMo's ten conversations with their
/// questions are 2.8 MB; past this it is a wrong file, refused before it fills memory.
pub const MAX_JSON_FILE_BYTES: u64 = 32 << 20;

/// What a JSONL line holds besides the message's text: the other fields with their names.
const LINE_ENVELOPE_BYTES: u64 = 64 << 10;

/// The longest JSONL line a message within `max_message_bytes` can be: JSON writes a control
/// character as `\u0000`, six bytes for one, so the text may take six times its length.
pub fn max_jsonl_line_bytes(max_message_bytes: usize) -> u64 {
    (max_message_bytes as u64)
        .saturating_mul(6)
        .saturating_add(LINE_ENVELOPE_BYTES)
}

/// Reads a file in the given format, refusing it whole if a message's text is longer than
/// `max_message_bytes`. Nothing is read unbounded: a JSONL file a line at a time, each line at
/// most [`max_jsonl_line_bytes`] and the file at most [`MAX_JSONL_FILE_BYTES`]; a LoCoMo file at
/// most [`MAX_JSON_FILE_BYTES`].
pub fn read_file(path: &Path, format: ImportFormat, max_message_bytes: usize) -> Result<Vec<NewMessage>, ImportError> {
    let file = path.display().to_string();
    match format {
        ImportFormat::Jsonl => read_jsonl(&file, path, max_message_bytes),
        ImportFormat::Locomo => parse_locomo(&file, &read_json_text(path)?, max_message_bytes),
    }
}

/// The most values (objects, lists, strings, numbers…) a JSON input file may hold: parsed, each
/// takes 32 bytes or more, so a file within the byte limit made of `[0,0,0,…]` would take half a
/// gigabyte; LoCoMo-8 holds 41,614.
pub const MAX_JSON_VALUES: u64 = 1_000_000;

/// Counts a JSON text's values without keeping any, stopping at the first past the limit.
struct CountValues<'a> {
    n_values: &'a mut u64,
}

impl<'de> serde::de::DeserializeSeed<'de> for CountValues<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CountValues<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        bump(self.n_values)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        bump(self.n_values)?;
        while seq
            .next_element_seed(CountValues {
                n_values: &mut *self.n_values,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        bump(self.n_values)?;
        while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
            map.next_value_seed(CountValues {
                n_values: &mut *self.n_values,
            })?;
        }
        Ok(())
    }
}

/// Counts one value; an error once past [`MAX_JSON_VALUES`], which stops the count there.
fn bump<E: serde::de::Error>(n_values: &mut u64) -> Result<(), E> {
    *n_values += 1;
    if *n_values > MAX_JSON_VALUES {
        return Err(E::custom("more values than a JSON input file may hold"));
    }
    Ok(())
}

/// Whether `text` holds at most [`MAX_JSON_VALUES`] values; a syntax error is left to the parser
/// that reads the file next, which names it. The count stops one past the limit, so the count
/// itself says which way the walk ended.
fn within_value_limit(text: &str) -> bool {
    use serde::de::DeserializeSeed;
    let mut n_values = 0;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let _ = (CountValues {
        n_values: &mut n_values,
    })
    .deserialize(&mut deserializer);
    n_values <= MAX_JSON_VALUES
}

/// The text of a JSON input file, refused past [`MAX_JSON_FILE_BYTES`], past [`MAX_JSON_VALUES`]
/// values, or when it is not UTF-8.
pub fn read_json_text(path: &Path) -> Result<String, ImportError> {
    let file = path.display().to_string();
    let bytes = memsift_core::files::read_at_most(path, MAX_JSON_FILE_BYTES).map_err(|error| match error {
        BoundedReadError::Io(source) => ImportError::Read {
            file: file.clone(),
            source,
        },
        BoundedReadError::TooLarge { limit } => ImportError::FileTooLarge {
            file: file.clone(),
            limit,
            what: "bytes, the most a JSON input file may hold",
        },
    })?;
    let text = String::from_utf8(bytes).map_err(|error| {
        let at = error.utf8_error().valid_up_to();
        let line = error.as_bytes()[..at].iter().filter(|&&byte| byte == b'\n').count() + 1;
        ImportError::Bad {
            file: file.clone(),
            line,
            problem: format!("not UTF-8 text (invalid byte at offset {at}); give the JSON file"),
        }
    })?;
    if !within_value_limit(&text) {
        return Err(ImportError::FileTooLarge {
            file,
            limit: MAX_JSON_VALUES,
            what: "values (objects, lists, strings, numbers), the most a JSON input file may hold",
        });
    }
    Ok(text)
}

/// Reads a JSONL file a line at a time through [`parse_jsonl_line`].
fn read_jsonl(file: &str, path: &Path, max_message_bytes: usize) -> Result<Vec<NewMessage>, ImportError> {
    use std::io::{BufRead, Read};
    let read_error = |source| ImportError::Read {
        file: file.to_owned(),
        source,
    };
    let too_large = || ImportError::FileTooLarge {
        file: file.to_owned(),
        limit: MAX_JSONL_FILE_BYTES,
        what: "bytes, the most a JSONL file may hold",
    };
    let opened = memsift_core::files::open_at_most(path, MAX_JSONL_FILE_BYTES).map_err(|error| match error {
        BoundedReadError::Io(source) => read_error(source),
        BoundedReadError::TooLarge { .. } => too_large(),
    })?;
    let line_limit = max_jsonl_line_bytes(max_message_bytes);
    let mut reader = std::io::BufReader::new(opened);
    let mut line = Vec::new();
    let (mut messages, mut n_read) = (Vec::new(), 0u64);
    for line_number in 1.. {
        line.clear();
        let n = (&mut reader)
            .take(line_limit + 1)
            .read_until(b'\n', &mut line)
            .map_err(read_error)?;
        if n == 0 {
            break;
        }
        n_read += n as u64;
        if n_read > MAX_JSONL_FILE_BYTES {
            return Err(too_large());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if n as u64 > line_limit {
            return Err(ImportError::LineTooLong {
                file: file.to_owned(),
                line: line_number,
                limit: line_limit,
            });
        }
        let text = std::str::from_utf8(&line).map_err(|error| ImportError::Bad {
            file: file.to_owned(),
            line: line_number,
            problem: format!(
                "not UTF-8 text (invalid byte at column {}); save the file as UTF-8",
                error.valid_up_to() + 1
            ),
        })?;
        messages.extend(parse_jsonl_line(file, line_number, text, max_message_bytes)?);
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default `[ingest] max_message_bytes`, far above every message these tests write.
    const LIMIT: usize = 1 << 20;

    fn jsonl_line(content: &str) -> String {
        serde_json::json!({
            "user": "ana", "conversation": "c1", "role": "user",
            "content": content, "timestamp": "2026-03-01T10:00:00Z",
        })
        .to_string()
    }

    /// `/dev/zero` (no size, no newline, endless) and a sparse 3 GB file, in both formats: each is
    /// one error naming the file and the limit, after reading at most one line's or one JSON
    /// file's worth of bytes.
    #[test]
    fn an_endless_device_and_a_huge_file_are_refused_naming_the_limit() {
        let zero = Path::new("/dev/zero");
        let error = read_file(zero, ImportFormat::Jsonl, LIMIT).unwrap_err();
        assert!(
            matches!(error, ImportError::LineTooLong { line: 1, limit, .. } if limit == max_jsonl_line_bytes(LIMIT)),
            "{error}"
        );
        let error = read_file(zero, ImportFormat::Locomo, LIMIT).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "/dev/zero: more than {MAX_JSON_FILE_BYTES} bytes, the most a JSON input file may hold; split it into smaller files"
            )
        );

        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge.jsonl");
        std::fs::File::create(&huge).unwrap().set_len(3 << 30).unwrap();
        for (format, limit) in [
            (ImportFormat::Jsonl, MAX_JSONL_FILE_BYTES),
            (ImportFormat::Locomo, MAX_JSON_FILE_BYTES),
        ] {
            let error = read_file(&huge, format, LIMIT).unwrap_err();
            assert!(
                matches!(&error, ImportError::FileTooLarge { limit: over, .. } if *over == limit),
                "{error}"
            );
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("{}: more than {limit} bytes", huge.display()))
            );
        }
    }

    /// A JSON file within the byte limit whose values would take far more memory parsed than
    /// its bytes (`[0,0,0,…]`) is refused by its count of values, before it is parsed; one a
    /// value under the limit is read.
    #[test]
    fn a_json_file_of_too_many_values_is_refused_before_it_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zeros.json");
        let zeros = |n: u64| format!("[{}0]", "0,".repeat(n as usize - 1));
        std::fs::write(&path, zeros(MAX_JSON_VALUES)).unwrap();
        let error = read_json_text(&path).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{}: more than {MAX_JSON_VALUES} values (objects, lists, strings, numbers), the most a JSON input file may hold; split it into smaller files",
                path.display()
            )
        );
        std::fs::write(&path, zeros(MAX_JSON_VALUES - 1)).unwrap();
        assert!(
            read_json_text(&path).is_ok(),
            "the list and its values are exactly the limit"
        );
        std::fs::write(&path, "[0, 0").unwrap();
        assert!(read_json_text(&path).is_ok(), "a syntax error is the parser's to name");
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named_by_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.jsonl");
        let mut bytes = jsonl_line("fine").into_bytes();
        bytes.extend_from_slice(b"\r\n{\"user\": \"a\xff\"}\n");
        std::fs::write(&path, bytes).unwrap();
        let error = read_file(&path, ImportFormat::Jsonl, LIMIT).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "{}:2: not UTF-8 text (invalid byte at column 12); save the file as UTF-8",
                path.display()
            )
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any text within the limit, control characters (six bytes each in JSON) included, is
        /// read from a file a line at a time; bytes past the longest line such a message can make
        /// are refused as a line too long, naming the line.
        #[test]
        fn the_line_bound_never_refuses_a_message_the_text_limit_accepts(
            limit in 1usize..512,
            chars in proptest::collection::vec(proptest::prelude::any::<char>(), 0..64),
            n_junk in 1u64..4096,
        ) {
            let mut content: String = chars.into_iter().cycle().take(limit).collect();
            while content.len() > limit {
                content.pop();
            }
            if content.trim().is_empty() {
                content = "x".to_owned();
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("chat.jsonl");
            std::fs::write(&path, format!("{}\n{}", jsonl_line(&content), jsonl_line("x"))).unwrap();
            let messages = read_file(&path, ImportFormat::Jsonl, limit).unwrap();
            proptest::prop_assert_eq!(&messages[0].content, &content);
            proptest::prop_assert_eq!(messages.len(), 2);

            let cap = max_jsonl_line_bytes(limit);
            let junk = vec![b'{'; (cap + n_junk) as usize];
            std::fs::write(&path, [jsonl_line("f").into_bytes(), b"\n".to_vec(), junk].concat()).unwrap();
            let error = read_file(&path, ImportFormat::Jsonl, limit).unwrap_err();
            let refused_line_two = matches!(error, ImportError::LineTooLong { line: 2, .. });
            proptest::prop_assert!(refused_line_two, "{}", error);
        }
    }
}
