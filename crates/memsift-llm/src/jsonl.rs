//! Streaming JSONL: a pure line splitter plus a stream adapter that decodes a response body line by line.
//!
//! Batch results can be hundreds of megabytes, so the body is never held whole. The splitter follows
//! the rules the SDKs learned the hard way: split on LF only, strip one trailing CR (a CRLF split
//! across two reads must not produce a stray empty line), skip empty lines, and keep a partial last
//! line until more bytes or the end of the body arrive.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;

use crate::error::LlmError;

/// Splits a byte stream into lines across arbitrary chunk boundaries.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one chunk and returns the complete, non-empty lines it finished (without LF or CR).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&byte| byte == b'\n') {
            self.partial.extend_from_slice(&rest[..newline]);
            rest = &rest[newline + 1..];
            let line = std::mem::take(&mut self.partial);
            if let Some(line) = finish_line(line) {
                lines.push(line);
            }
        }
        self.partial.extend_from_slice(rest);
        lines
    }

    /// Ends the input: the last line, if the body did not end with a newline.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        finish_line(std::mem::take(&mut self.partial))
    }

    /// Bytes held for an unfinished line.
    pub fn pending_bytes(&self) -> usize {
        self.partial.len()
    }
}

fn finish_line(mut line: Vec<u8>) -> Option<Vec<u8>> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    // A line of only spaces is as empty as an empty one; neither is a record.
    (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
}

/// A stream of decoded JSONL records. Dropping it closes the connection.
pub type JsonLines<T> = Pin<Box<dyn Stream<Item = Result<T, LlmError>> + Send>>;

struct State<S, T> {
    body: S,
    splitter: LineSplitter,
    ready: VecDeque<Vec<u8>>,
    line_number: usize,
    done: bool,
    provider: &'static str,
    _record: PhantomData<fn() -> T>,
}

/// Decodes a byte stream into JSONL records of type `T`. A line that is not valid `T` yields an
/// error item and the stream goes on, so one bad line does not hide the others; a broken body
/// yields a transient error and ends the stream.
pub fn decode_lines<S, T>(provider: &'static str, body: S) -> JsonLines<T>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + Unpin + 'static,
    T: DeserializeOwned + Send + 'static,
{
    let state = State {
        body,
        splitter: LineSplitter::new(),
        ready: VecDeque::new(),
        line_number: 0,
        done: false,
        provider,
        _record: PhantomData::<fn() -> T>,
    };
    Box::pin(futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(line) = state.ready.pop_front() {
                state.line_number += 1;
                let item = serde_json::from_slice::<T>(&line).map_err(|error| LlmError::Protocol {
                    provider: state.provider,
                    detail: format!("JSONL record {} is not valid: {error}", state.line_number).into(),
                });
                return Some((item, state));
            }
            if state.done {
                return None;
            }
            match state.body.next().await {
                Some(Ok(chunk)) => {
                    let lines = state.splitter.push(&chunk);
                    state.ready.extend(lines);
                }
                Some(Err(error)) => {
                    state.done = true;
                    state.ready.clear();
                    return Some((Err(LlmError::from_transport(state.provider, &error)), state));
                }
                None => {
                    state.done = true;
                    state.ready.extend(state.splitter.finish());
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::new();
        let mut lines: Vec<Vec<u8>> = chunks.iter().flat_map(|chunk| splitter.push(chunk)).collect();
        lines.extend(splitter.finish());
        lines.into_iter().map(|line| String::from_utf8(line).unwrap()).collect()
    }

    #[test]
    fn lines_split_on_lf_with_cr_stripped_and_empty_lines_skipped() {
        assert_eq!(split_all(&[b"a\r\n\r\nb\n\n c \n"]), vec!["a", "b", " c "]);
    }

    #[test]
    fn a_crlf_split_across_reads_yields_no_stray_line() {
        assert_eq!(
            split_all(&[b"{\"a\":1}\r", b"\n{\"b\":2}\r\n"]),
            vec!["{\"a\":1}", "{\"b\":2}"]
        );
    }

    #[test]
    fn a_line_split_mid_way_and_an_unterminated_last_line_are_kept() {
        assert_eq!(split_all(&[b"ab", b"c\nde", b"f"]), vec!["abc", "def"]);
        assert_eq!(split_all(&[b"", b"x", b"\r"]), vec!["x"]);
    }

    #[test]
    fn every_chunking_of_a_body_gives_the_same_lines() {
        let body = b"{\"id\":1}\r\n{\"id\":2}\n\r\n{\"id\":3}\r\n";
        let expected = split_all(&[body]);
        assert_eq!(expected.len(), 3);
        for size in 1..body.len() {
            let chunks: Vec<&[u8]> = body.chunks(size).collect();
            assert_eq!(split_all(&chunks), expected, "chunk size {size}");
        }
    }

    #[test]
    fn a_large_line_is_assembled_from_many_small_reads() {
        let big = "x".repeat(1 << 20);
        let body = format!("{big}\n");
        let chunks: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
        let lines = split_all(&chunks);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), 1 << 20);
    }

    #[tokio::test]
    async fn decode_lines_reports_a_bad_line_and_continues() {
        let chunks: Vec<Result<Bytes, reqwest::Error>> = vec![
            Ok(Bytes::from_static(b"{\"n\":1}\r")),
            Ok(Bytes::from_static(b"\nnot json\n{\"n\"")),
            Ok(Bytes::from_static(b":3}")),
        ];
        let stream = futures_util::stream::iter(chunks);
        let items: Vec<Result<serde_json::Value, LlmError>> = decode_lines("test", stream).collect().await;
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_ref().unwrap()["n"], 1);
        assert!(matches!(items[1], Err(LlmError::Protocol { .. })));
        assert_eq!(items[2].as_ref().unwrap()["n"], 3);
    }
}
