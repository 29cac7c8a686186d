//! Streaming JSONL: a pure line splitter plus a stream adapter that decodes a response body line by line.
//!
//! Batch results can be hundreds of megabytes, so the body is never held whole. The splitter follows
//! the rules the SDKs learned the hard way: split on LF only, strip one trailing CR (a CRLF split
//! across two reads must not produce a stray empty line), skip empty lines, and keep a partial last
//! line until more bytes or the end of the body arrive.
//!
//! Every read is bounded ([`ReadLimits`]): a line longer than the cap, a body larger than the cap
//! or a pause between bytes longer than the idle limit ends the stream with an error, so a provider
//! (or a proxy in front of it) that sends a line without end, an endless body or nothing at all
//! costs a bounded amount of memory and time.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;

use crate::error::LlmError;

/// How much a streamed body may cost: the longest line, the whole body, the longest pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// The longest line kept (bytes, without its line end).
    pub max_line_bytes: usize,
    /// The largest body read.
    pub max_body_bytes: u64,
    /// The longest wait for the next bytes of a body that has started.
    pub idle_timeout: Duration,
}

impl Default for ReadLimits {
    /// 64 MiB a line (an answer of the largest output any model gives is a few MiB), 8 GiB a body
    /// (the providers' own file limits are 200 MB to 256 MB per input file; results are larger),
    /// and two minutes between bytes.
    fn default() -> Self {
        Self {
            max_line_bytes: 64 << 20,
            max_body_bytes: 8 << 30,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// A line went past the splitter's cap; what was held of it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineTooLong {
    /// The cap in bytes.
    pub limit: usize,
}

/// Splits a byte stream into lines across arbitrary chunk boundaries, holding at most a capped
/// line in memory.
#[derive(Debug)]
pub struct LineSplitter {
    partial: Vec<u8>,
    max_line_bytes: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::with_limit(ReadLimits::default().max_line_bytes)
    }
}

impl LineSplitter {
    /// An empty splitter with the default line cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty splitter that refuses lines longer than `max_line_bytes` (line end excluded).
    pub fn with_limit(max_line_bytes: usize) -> Self {
        Self {
            partial: Vec::new(),
            max_line_bytes,
        }
    }

    /// Feeds one chunk and returns the complete, non-empty lines it finished (without LF or CR),
    /// or [`LineTooLong`] as soon as a line passes the cap, finished or not.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, LineTooLong> {
        let mut lines = Vec::new();
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&byte| byte == b'\n') {
            self.take(&rest[..newline])?;
            rest = &rest[newline + 1..];
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > self.max_line_bytes {
                return Err(LineTooLong {
                    limit: self.max_line_bytes,
                });
            }
            if let Some(line) = finish_line(line) {
                lines.push(line);
            }
        }
        self.take(rest)?;
        Ok(lines)
    }

    fn take(&mut self, bytes: &[u8]) -> Result<(), LineTooLong> {
        // One byte of slack for the CR a CRLF line end leaves before its LF arrives.
        if self.partial.len() + bytes.len() > self.max_line_bytes.saturating_add(1) {
            self.partial = Vec::new();
            return Err(LineTooLong {
                limit: self.max_line_bytes,
            });
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// Ends the input: the last line, if the body did not end with a newline.
    pub fn finish(&mut self) -> Result<Option<Vec<u8>>, LineTooLong> {
        let line = finish_line(std::mem::take(&mut self.partial));
        match line {
            Some(line) if line.len() > self.max_line_bytes => Err(LineTooLong {
                limit: self.max_line_bytes,
            }),
            line => Ok(line),
        }
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
    limits: ReadLimits,
    body_bytes: u64,
    _record: PhantomData<fn() -> T>,
}

/// Decodes a byte stream into JSONL records of type `T`. A line that is not valid `T` yields an
/// error item and the stream goes on, so one bad line does not hide the others; a broken body
/// yields a transient error and ends the stream, and so does a read past `limits` (a line or a
/// body too long: a protocol error; no bytes for the idle limit: a transient one).
pub fn decode_lines<S, T>(provider: &'static str, body: S, limits: ReadLimits) -> JsonLines<T>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + Unpin + 'static,
    T: DeserializeOwned + Send + 'static,
{
    let state = State {
        body,
        splitter: LineSplitter::with_limit(limits.max_line_bytes),
        ready: VecDeque::new(),
        line_number: 0,
        done: false,
        provider,
        limits,
        body_bytes: 0,
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
            let next = match tokio::time::timeout(state.limits.idle_timeout, state.body.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let detail = format!(
                        "the body stopped sending for {} s after line {}",
                        state.limits.idle_timeout.as_secs_f64(),
                        state.line_number
                    );
                    let provider = state.provider;
                    return Some(state.fail(LlmError::Transient {
                        provider,
                        status: None,
                        detail: detail.into(),
                    }));
                }
            };
            match next {
                Some(Ok(chunk)) => {
                    state.body_bytes += chunk.len() as u64;
                    if state.body_bytes > state.limits.max_body_bytes {
                        let detail = format!("the body is larger than {} bytes", state.limits.max_body_bytes);
                        let provider = state.provider;
                        return Some(state.fail(LlmError::Protocol {
                            provider,
                            detail: detail.into(),
                        }));
                    }
                    match state.splitter.push(&chunk) {
                        Ok(lines) => state.ready.extend(lines),
                        Err(LineTooLong { limit }) => {
                            let detail = format!("line {} is longer than {limit} bytes", state.line_number + 1);
                            let provider = state.provider;
                            return Some(state.fail(LlmError::Protocol {
                                provider,
                                detail: detail.into(),
                            }));
                        }
                    }
                }
                Some(Err(error)) => {
                    state.done = true;
                    state.ready.clear();
                    return Some((Err(LlmError::from_transport(state.provider, &error)), state));
                }
                None => match state.splitter.finish() {
                    Ok(last) => {
                        state.done = true;
                        state.ready.extend(last);
                    }
                    Err(LineTooLong { limit }) => {
                        let detail = format!("line {} is longer than {limit} bytes", state.line_number + 1);
                        let provider = state.provider;
                        return Some(state.fail(LlmError::Protocol {
                            provider,
                            detail: detail.into(),
                        }));
                    }
                },
            }
        }
    }))
}

impl<S, T> State<S, T> {
    /// Ends the stream with `error`, dropping every line not yet handed out: what follows a read
    /// past a limit is not trusted.
    fn fail(mut self, error: LlmError) -> (Result<T, LlmError>, Self) {
        self.done = true;
        self.ready.clear();
        (Err(error), self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut splitter = LineSplitter::new();
        let mut lines: Vec<Vec<u8>> = chunks.iter().flat_map(|chunk| splitter.push(chunk).unwrap()).collect();
        lines.extend(splitter.finish().unwrap());
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
        let items: Vec<Result<serde_json::Value, LlmError>> =
            decode_lines("test", stream, ReadLimits::default()).collect().await;
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].as_ref().unwrap()["n"], 1);
        assert!(matches!(items[1], Err(LlmError::Protocol { .. })));
        assert_eq!(items[2].as_ref().unwrap()["n"], 3);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// Whatever the lines and however the body is cut into reads, the splitter refuses exactly
        /// when some line is longer than its cap, and never holds more than the cap meanwhile.
        #[test]
        fn the_splitter_refuses_exactly_the_lines_over_its_cap_under_any_chunking(
            lengths in proptest::collection::vec(0usize..40, 1..12),
            cap in 1usize..40,
            chunk in 1usize..64,
            crlf in proptest::bool::ANY,
            unterminated in proptest::bool::ANY,
        ) {
            let end: &[u8] = if crlf { b"\r\n" } else { b"\n" };
            let mut body = Vec::new();
            for (index, length) in lengths.iter().enumerate() {
                body.extend(std::iter::repeat_n(b'a' + (index % 26) as u8, *length));
                if index + 1 < lengths.len() || !unterminated {
                    body.extend_from_slice(end);
                }
            }
            let mut splitter = LineSplitter::with_limit(cap);
            let mut refused = false;
            let mut n_lines = 0;
            for piece in body.chunks(chunk) {
                match splitter.push(piece) {
                    Ok(lines) => n_lines += lines.len(),
                    Err(LineTooLong { limit }) => {
                        proptest::prop_assert_eq!(limit, cap);
                        refused = true;
                        break;
                    }
                }
                proptest::prop_assert!(splitter.pending_bytes() <= cap + 1);
            }
            if !refused {
                match splitter.finish() {
                    Ok(last) => n_lines += usize::from(last.is_some()),
                    Err(_) => refused = true,
                }
            }
            let too_long = lengths.iter().any(|length| *length > cap);
            proptest::prop_assert_eq!(refused, too_long);
            if !refused {
                proptest::prop_assert_eq!(n_lines, lengths.iter().filter(|length| **length > 0).count());
            }
        }
    }

    fn chunks(parts: &[&'static [u8]]) -> Vec<Result<Bytes, reqwest::Error>> {
        parts.iter().map(|part| Ok(Bytes::from_static(part))).collect()
    }

    #[tokio::test]
    async fn a_line_without_end_stops_the_stream_at_the_cap() {
        // An endless line: the same chunk forever, never a newline.
        let endless = futures_util::stream::repeat_with(|| Ok(Bytes::from_static(&[b'x'; 4096])));
        let limits = ReadLimits {
            max_line_bytes: 1 << 20,
            ..ReadLimits::default()
        };
        let items: Vec<Result<serde_json::Value, LlmError>> = decode_lines("test", endless, limits).collect().await;
        assert_eq!(items.len(), 1);
        let error = items[0].as_ref().unwrap_err().to_string();
        assert!(error.contains("line 1 is longer than 1048576 bytes"), "{error}");
    }

    #[tokio::test]
    async fn a_body_past_its_cap_ends_with_an_error_after_the_lines_before_it() {
        let stream = futures_util::stream::iter(chunks(&[b"{\"n\":1}\n", b"{\"n\":2}\n{\"n\":3}\n"]));
        let limits = ReadLimits {
            max_body_bytes: 12,
            ..ReadLimits::default()
        };
        let items: Vec<Result<serde_json::Value, LlmError>> = decode_lines("test", stream, limits).collect().await;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].as_ref().unwrap()["n"], 1);
        assert!(
            items[1]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("larger than 12 bytes")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_sending_ends_with_a_transient_error_after_the_idle_limit() {
        let stalled =
            futures_util::stream::iter(chunks(&[b"{\"n\":1}\n{\"n\""])).chain(futures_util::stream::pending());
        let limits = ReadLimits {
            idle_timeout: Duration::from_secs(30),
            ..ReadLimits::default()
        };
        let started = tokio::time::Instant::now();
        let items: Vec<Result<serde_json::Value, LlmError>> = decode_lines("test", stalled, limits).collect().await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(items.len(), 2);
        assert!(matches!(items[1], Err(LlmError::Transient { status: None, .. })));
    }
}
