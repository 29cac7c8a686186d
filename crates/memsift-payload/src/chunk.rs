//! Cutting a segment into extraction chunks and rendering each chunk's user message.
//!
//! A chunk is cut on *unit* boundaries: a unit is a user turn plus the assistant, tool and system
//! turns that follow it up to the next user turn, so an answer always travels with its question.
//! Turns before the first user turn (an assistant greeting) join the first unit. A unit larger than
//! the budget becomes a chunk of its own rather than being split or dropped.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use memsift_core::contract::Turn;
use memsift_core::prompt::Prompt;
use memsift_core::status::Role;
use memsift_core::transcript::render_turns;
use memsift_core::{MemoryId, MessageId};

use crate::short_id::short_ids;
use memsift_tokens::count_tokens;

/// A memory the model should know about (and not restate) while reading a chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownMemory {
    /// Its id; the prompt shows a short form of it.
    pub id: MemoryId,
    /// Its text.
    pub text: String,
}

/// Limits on one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadOptions {
    /// Most tokens (system prompt plus user message) a chunk may use, unless one unit alone is larger.
    pub chunk_budget_tokens: usize,
    /// Most known memories shown per chunk; the first ones in the order given are kept.
    pub max_known_memories: usize,
}

impl Default for PayloadOptions {
    fn default() -> Self {
        Self {
            chunk_budget_tokens: 6000,
            max_known_memories: 40,
        }
    }
}

/// One request's worth of a segment.
#[derive(Clone, Debug, PartialEq)]
pub struct ExtractionChunk {
    /// 0-based position of the chunk in its segment.
    pub chunk_index: usize,
    /// Exactly the prompt text: identical across every request so the provider caches it.
    pub system_prompt: String,
    /// The prompt's version (`name@hash`), recorded on the request and its memories.
    pub prompt_version: String,
    /// Today's date, the known memories as `[shortid] text` lines, the rendered turns and the
    /// closing instruction.
    pub user_message: String,
    /// Turn label → message id, for this chunk's turns only.
    pub turns: BTreeMap<String, MessageId>,
    /// Short id → full id, for the known memories shown.
    pub short_ids: BTreeMap<String, MemoryId>,
    /// Short id → the memory's text as given (the prompt shows it on one line, `<`, `>` and `&` escaped).
    pub known_texts: BTreeMap<String, String>,
    /// System prompt plus user message tokens, counted with [`crate::count_tokens`].
    pub n_tokens: usize,
}

const CLOSING_INSTRUCTION: &str = "Extract NEW long-term memories about the user from the conversation above, \
following the principles in your instructions. Do not restate known memories. Reply with only a JSON array \
starting with `[` and ending with `]`; `[]` when there is nothing new.";

/// Cuts `turns` (one segment, in order) into chunks under `options.chunk_budget_tokens`.
///
/// A segment without any user turn yields no chunk: assistant and tool turns are context only,
/// so there is nothing to extract. `known` is the memory context for every chunk (the caller picks
/// it: memories the assistant referenced plus the user's most similar ones), in order of
/// relevance; it is capped at `options.max_known_memories` and duplicates are shown once. Turn
/// labels are assumed unique within the segment, as the `evidence_turns` contract needs them to be.
pub fn build_extraction_chunks(
    prompt: &Prompt,
    today: DateTime<Utc>,
    turns: &[(MessageId, Turn)],
    known: &[KnownMemory],
    options: &PayloadOptions,
) -> Vec<ExtractionChunk> {
    let units = units(turns);
    if units.is_empty() {
        return Vec::new();
    }
    let context = MemoryContext::new(known, options.max_known_memories);
    let header = header(today, &context);
    let overhead = count_tokens(&prompt.text) + count_tokens(&header) + count_tokens(CLOSING_INSTRUCTION);
    let unit_tokens: Vec<usize> = units
        .iter()
        .map(|unit| count_tokens(&render(&turns[unit.clone()])))
        .collect();

    let budget = options.chunk_budget_tokens;
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < units.len() {
        // Grow greedily on per-unit counts, then confirm with a count of the real text: BPE counts
        // are not exactly additive across joins, and the budget is a promise.
        let mut end = start + 1;
        let mut estimate = overhead + unit_tokens[start];
        while end < units.len() && estimate + unit_tokens[end] <= budget {
            estimate += unit_tokens[end];
            end += 1;
        }
        let chunk = loop {
            let slice = &turns[units[start].start..units[end - 1].end];
            let chunk = assemble(prompt, &header, &context, slice, chunks.len());
            if chunk.n_tokens <= budget || end - start == 1 {
                break chunk;
            }
            end -= 1;
        };
        chunks.push(chunk);
        start = end;
    }
    chunks
}

/// Index ranges of `turns`, one per unit; empty when there is no user turn.
fn units(turns: &[(MessageId, Turn)]) -> Vec<std::ops::Range<usize>> {
    let starts: Vec<usize> = turns
        .iter()
        .enumerate()
        .filter(|(_, (_, turn))| turn.role == Role::User)
        .map(|(index, _)| index)
        .collect();
    let mut units = Vec::with_capacity(starts.len());
    for (position, &begin) in starts.iter().enumerate() {
        // Leading non-user turns ride with the first unit so no chunk is context alone.
        let begin = if position == 0 { 0 } else { begin };
        let end = starts.get(position + 1).copied().unwrap_or(turns.len());
        units.push(begin..end);
    }
    units
}

fn render(turns: &[(MessageId, Turn)]) -> String {
    let plain: Vec<Turn> = turns.iter().map(|(_, turn)| turn.clone()).collect();
    render_turns(&plain)
}

/// The known memories shown, with their short ids, identical for every chunk of a call.
struct MemoryContext {
    short_ids: BTreeMap<String, MemoryId>,
    known_texts: BTreeMap<String, String>,
    /// `(short id, text)` in the caller's order of relevance.
    lines: Vec<(String, String)>,
}

impl MemoryContext {
    fn new(known: &[KnownMemory], cap: usize) -> Self {
        let mut seen = BTreeSet::new();
        let shown: Vec<&KnownMemory> = known.iter().filter(|memory| seen.insert(memory.id)).take(cap).collect();
        let ids: Vec<MemoryId> = shown.iter().map(|memory| memory.id).collect();
        let short_ids = short_ids(&ids);
        let short_of: BTreeMap<MemoryId, String> = short_ids.iter().map(|(short, id)| (*id, short.clone())).collect();
        let mut known_texts = BTreeMap::new();
        let mut lines = Vec::with_capacity(shown.len());
        for memory in shown {
            let short = short_of[&memory.id].clone();
            known_texts.insert(short.clone(), memory.text.clone());
            lines.push((short, memory.text.clone()));
        }
        Self {
            short_ids,
            known_texts,
            lines,
        }
    }
}

/// Everything before the turns: the date and the known memories.
fn header(today: DateTime<Utc>, context: &MemoryContext) -> String {
    let mut out = format!(
        "Today's date: {} (UTC). Each turn's `at` attribute is when it was said.\n\n",
        today.format("%Y-%m-%d, %A")
    );
    if context.lines.is_empty() {
        out.push_str("Known memories: none.\n");
    } else {
        out.push_str("Known memories (short id in brackets; do not restate them):\n");
        for (short, text) in &context.lines {
            out.push('[');
            out.push_str(short);
            out.push_str("] ");
            out.push_str(&one_line(text));
            out.push('\n');
        }
    }
    out.push_str("\nConversation:\n");
    out
}

/// A memory text as one inert line: a newline could start a fake `[id]` line, and `<` could open
/// a fake `<turn>`, so whitespace runs collapse and markup characters are escaped like turn text.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    flat.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn assemble(
    prompt: &Prompt,
    header: &str,
    context: &MemoryContext,
    turns: &[(MessageId, Turn)],
    chunk_index: usize,
) -> ExtractionChunk {
    let user_message = format!("{header}{}\n{CLOSING_INSTRUCTION}", render(turns));
    let n_tokens = count_tokens(&prompt.text) + count_tokens(&user_message);
    ExtractionChunk {
        chunk_index,
        system_prompt: prompt.text.clone(),
        prompt_version: prompt.version.clone(),
        user_message,
        turns: turns.iter().map(|(id, turn)| (turn.label.clone(), *id)).collect(),
        short_ids: context.short_ids.clone(),
        known_texts: context.known_texts.clone(),
        n_tokens,
    }
}
