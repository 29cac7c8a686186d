//! Cutting a segment into extraction chunks and rendering each chunk's user message.
//!
//! A chunk is cut on *unit* boundaries: a unit is a user turn plus the assistant, tool and system
//! turns that follow it up to the next user turn, so an answer always travels with its question.
//! Turns before the first user turn (an assistant greeting) join the first unit. A unit larger than
//! a chunk's room is cut on its turn boundaries, and a turn larger than the room is split into
//! parts (`split.rs`) labelled like the whole turn, so every chunk stays under the budget, every
//! byte of every turn is sent, and evidence cited from any part maps to the turn's message. What
//! was cut is returned with the chunks, for the segment's note.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use memsift_core::contract::Turn;
use memsift_core::prompt::Prompt;
use memsift_core::status::Role;
use memsift_core::{MemoryId, MessageId};

use memsift_tokens::count_tokens;

use crate::short_id::short_ids;
use crate::split::{LabelTooLong, Piece, split_turn};

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
    /// Most tokens (system prompt plus user message) a chunk may use; no chunk passes it.
    pub chunk_budget_tokens: usize,
    /// Most known memories shown per chunk; the first ones in the order given are kept, and only
    /// as many as fit in half of what the prompt and [`MIN_TURN_ROOM_TOKENS`] leave of the budget.
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
    /// Turn label → message id, for this chunk's turns only (a turn sent in parts: each part's).
    pub turns: BTreeMap<String, MessageId>,
    /// Short id → full id, for the known memories shown.
    pub short_ids: BTreeMap<String, MemoryId>,
    /// Short id → the memory's text as given (the prompt shows it on one line, `<`, `>` and `&` escaped).
    pub known_texts: BTreeMap<String, String>,
    /// System prompt plus user message tokens, counted with [`crate::count_tokens`]; at most the
    /// budget.
    pub n_tokens: usize,
}

/// A turn too long for one chunk, sent in parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitTurn {
    /// Its label, which every part carries.
    pub label: String,
    /// Its message.
    pub message_id: MessageId,
    /// Its tokens as one element.
    pub tokens: usize,
    /// How many parts it was sent in.
    pub parts: usize,
    /// The first and last chunk holding a part.
    pub chunks: (usize, usize),
    /// Whether its speaker's name was left out because the name alone would not fit a part.
    pub speaker_left_out: bool,
}

/// A segment's chunks, and the turns they show other than whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chunking {
    /// One per request, in order.
    pub chunks: Vec<ExtractionChunk>,
    /// The turns sent in parts, in order.
    pub split_turns: Vec<SplitTurn>,
}

impl Chunking {
    /// One line for the segment's note, saying which turns were sent in parts and why; `None`
    /// when every turn went whole.
    pub fn note(&self, budget: usize) -> Option<String> {
        const SHOWN: usize = 5;
        if self.split_turns.is_empty() {
            return None;
        }
        let mut parts: Vec<String> = self
            .split_turns
            .iter()
            .take(SHOWN)
            .map(|split| {
                let speaker = if split.speaker_left_out {
                    ", speaker name left out"
                } else {
                    ""
                };
                // Two short parts can share a chunk, so the chunks are counted, not implied.
                let n_chunks = split.chunks.1 - split.chunks.0 + 1;
                let chunks = if n_chunks == 1 {
                    format!("in chunk {}", split.chunks.0)
                } else {
                    format!("over {n_chunks} chunks ({}-{})", split.chunks.0, split.chunks.1)
                };
                format!(
                    "turn {} ({} tokens) sent in {} parts {chunks}{speaker}",
                    one_line(&split.label).chars().take(40).collect::<String>(),
                    split.tokens,
                    split.parts,
                )
            })
            .collect();
        if self.split_turns.len() > SHOWN {
            parts.push(format!("{} more turns", self.split_turns.len() - SHOWN));
        }
        Some(format!(
            "{}: larger than a {budget}-token chunk (batch.chunk_budget_tokens)",
            parts.join("; ")
        ))
    }
}

/// Why a segment cannot be cut into chunks under the budget.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The prompt and a chunk's fixed text leave too little of the budget for turns.
    #[error(
        "batch.chunk_budget_tokens = {budget} leaves no room for turns: the extraction prompt, the date and the closing instruction take {framing} tokens; use at least {needed}"
    )]
    BudgetTooSmall {
        /// The budget.
        budget: usize,
        /// What every chunk spends before its turns.
        framing: usize,
        /// The smallest budget taken.
        needed: usize,
    },
    /// A turn whose label alone fills a chunk (a source id of thousands of characters).
    #[error(
        "turn {label}… cannot be sent: its label alone nearly fills a {budget}-token chunk; shorten the message's external id or raise batch.chunk_budget_tokens"
    )]
    LabelTooLong {
        /// The label's first characters.
        label: String,
        /// The budget.
        budget: usize,
    },
    /// However its turns were cut, a chunk counted over the budget.
    #[error(
        "a chunk counts {tokens} tokens, over batch.chunk_budget_tokens = {budget}, however its turns are cut; raise the budget"
    )]
    CannotFit {
        /// The budget.
        budget: usize,
        /// The last count.
        tokens: usize,
    },
}

const CLOSING_INSTRUCTION: &str = "Extract NEW long-term memories about the user from the conversation above, \
following the principles in your instructions. Do not restate known memories. Reply with only a JSON array \
starting with `[` and ending with `]`; `[]` when there is nothing new.";

/// Tokens of turn text every chunk must have room for beside its fixed text (see
/// [`minimum_chunk_budget`]): enough for a turn's tags and some of its words.
pub const MIN_TURN_ROOM_TOKENS: usize = 256;

/// Tokens held back from the room for what joining a chunk's parts can add to their separate
/// counts; on the rare chunk that still counts over the budget, the next, wider one is tried.
const JOIN_MARGINS: [usize; 3] = [8, 32, 96];

/// The smallest chunk budget `prompt` can be cut under: the prompt, the date line, the closing
/// instruction and [`MIN_TURN_ROOM_TOKENS`].
pub fn minimum_chunk_budget(prompt: &Prompt, today: DateTime<Utc>) -> usize {
    framing_tokens(prompt, today) + MIN_TURN_ROOM_TOKENS
}

/// Whether a chunk budget of `budget` tokens holds `prompt`: `Ok` when it is at least
/// [`minimum_chunk_budget`], else `Err` with that minimum.
///
/// A token is at least one byte, so a budget at least the framing's length in bytes plus
/// [`MIN_TURN_ROOM_TOKENS`] is accepted without counting: every command checks its configuration
/// at start, and the tokenizer's tables are about 50 MB of memory that a daemon should not hold
/// until it plans its first segment. Only a budget below that bound is counted exactly.
pub fn check_chunk_budget(prompt: &Prompt, today: DateTime<Utc>, budget: usize) -> Result<(), usize> {
    if budget >= framing_bytes(prompt, today) + MIN_TURN_ROOM_TOKENS {
        return Ok(());
    }
    let needed = minimum_chunk_budget(prompt, today);
    if budget >= needed { Ok(()) } else { Err(needed) }
}

/// An upper bound of [`framing_tokens`]: the same texts' lengths in bytes.
fn framing_bytes(prompt: &Prompt, today: DateTime<Utc>) -> usize {
    let empty = MemoryContext::new(&[], 0, 0);
    prompt.text.len() + header(today, &empty).len() + CLOSING_INSTRUCTION.len() + 1
}

/// What every chunk spends before its turns and memories.
fn framing_tokens(prompt: &Prompt, today: DateTime<Utc>) -> usize {
    let empty = MemoryContext::new(&[], 0, 0);
    count_tokens(&prompt.text) + count_tokens(&header(today, &empty)) + count_tokens(CLOSING_INSTRUCTION) + 1
}

/// Cuts `turns` (one segment, in order) into chunks of at most `options.chunk_budget_tokens`.
///
/// A segment without any user turn yields no chunk: assistant and tool turns are context only,
/// so there is nothing to extract. `known` is the memory context for every chunk (the caller picks
/// it: memories the assistant referenced plus the user's most similar ones), in order of
/// relevance; it is capped at `options.max_known_memories`, at half of what the prompt and
/// [`MIN_TURN_ROOM_TOKENS`] leave of the budget, and duplicates are shown once. Turn labels are assumed unique within the segment,
/// as the `evidence_turns` contract needs them to be.
pub fn build_extraction_chunks(
    prompt: &Prompt,
    today: DateTime<Utc>,
    turns: &[(MessageId, Turn)],
    known: &[KnownMemory],
    options: &PayloadOptions,
) -> Result<Chunking, PayloadError> {
    let units = units(turns);
    if units.is_empty() {
        return Ok(Chunking::default());
    }
    let budget = options.chunk_budget_tokens;
    let framing = framing_tokens(prompt, today);
    let needed = framing + MIN_TURN_ROOM_TOKENS;
    if budget < needed {
        return Err(PayloadError::BudgetTooSmall {
            budget,
            framing,
            needed,
        });
    }
    // Known memories take at most half of what the prompt and the least room for turns leave.
    let context = MemoryContext::new(known, options.max_known_memories, (budget - needed) / 2);
    let header = header(today, &context);
    let fixed = count_tokens(&prompt.text) + count_tokens(&header) + count_tokens(CLOSING_INSTRUCTION) + 1;
    let frame = Frame {
        prompt,
        header: &header,
        context: &context,
        turns,
        budget,
    };
    let mut last = 0;
    for margin in JOIN_MARGINS {
        let room = budget.saturating_sub(fixed + margin);
        let items = items(turns, &units, room, budget)?;
        match frame.pack(&items, room) {
            Ok(chunks) => {
                let split_turns = split_turns(turns, &chunks.1);
                return Ok(Chunking {
                    chunks: chunks.0,
                    split_turns,
                });
            }
            Err(tokens) => last = tokens,
        }
    }
    Err(PayloadError::CannotFit { budget, tokens: last })
}

/// Consecutive elements that travel together: a unit that fits, or one turn or part of one.
struct Item {
    pieces: Vec<Piece>,
    tokens: usize,
}

/// The packing items of a segment under `room` tokens of turns per chunk.
fn items(
    turns: &[(MessageId, Turn)],
    units: &[std::ops::Range<usize>],
    room: usize,
    budget: usize,
) -> Result<Vec<Item>, PayloadError> {
    let mut items = Vec::with_capacity(units.len());
    for unit in units {
        let pieces: Vec<Piece> = unit.clone().map(|index| Piece::whole(index, &turns[index].1)).collect();
        let tokens = count_tokens(&render(turns, &pieces));
        if tokens <= room {
            items.push(Item { pieces, tokens });
            continue;
        }
        // Too large together: its turns go one by one, and a turn too large alone in parts.
        for piece in pieces {
            let turn = &turns[piece.turn].1;
            let tokens = if unit.len() == 1 { tokens } else { piece.tokens(turn) };
            if tokens <= room {
                items.push(Item {
                    pieces: vec![piece],
                    tokens,
                });
                continue;
            }
            let parts =
                split_turn(piece.turn, turn, room, tokens).map_err(|LabelTooLong| PayloadError::LabelTooLong {
                    label: turn.label.chars().take(40).collect(),
                    budget,
                })?;
            for part in parts {
                let tokens = part.tokens(turn);
                items.push(Item {
                    pieces: vec![part],
                    tokens,
                });
            }
        }
    }
    Ok(items)
}

/// What every chunk of one segment shares.
struct Frame<'a> {
    prompt: &'a Prompt,
    header: &'a str,
    context: &'a MemoryContext,
    turns: &'a [(MessageId, Turn)],
    budget: usize,
}

impl Frame<'_> {
    /// Packs items greedily while their own counts fit `room`, then confirms each chunk with a
    /// count of its real text (BPE counts are not exactly additive across joins, and the budget
    /// is a promise). `Err` is the count of a chunk of one item that still passed the budget.
    #[allow(clippy::type_complexity)]
    fn pack(&self, items: &[Item], room: usize) -> Result<(Vec<ExtractionChunk>, Vec<Vec<Piece>>), usize> {
        let mut chunks = Vec::new();
        let mut shown = Vec::new();
        let mut start = 0;
        while start < items.len() {
            let mut end = start + 1;
            let mut used = items[start].tokens;
            while end < items.len() && used + items[end].tokens <= room {
                used += items[end].tokens;
                end += 1;
            }
            loop {
                let pieces: Vec<Piece> = items[start..end].iter().flat_map(|item| item.pieces.clone()).collect();
                let chunk = self.assemble(&pieces, chunks.len());
                if chunk.n_tokens <= self.budget {
                    chunks.push(chunk);
                    shown.push(pieces);
                    break;
                }
                if end - start == 1 {
                    return Err(chunk.n_tokens);
                }
                end -= 1;
            }
            start = end;
        }
        Ok((chunks, shown))
    }

    fn assemble(&self, pieces: &[Piece], chunk_index: usize) -> ExtractionChunk {
        let user_message = format!("{}{}\n{CLOSING_INSTRUCTION}", self.header, render(self.turns, pieces));
        let n_tokens = count_tokens(&self.prompt.text) + count_tokens(&user_message);
        ExtractionChunk {
            chunk_index,
            system_prompt: self.prompt.text.clone(),
            prompt_version: self.prompt.version.clone(),
            user_message,
            turns: pieces
                .iter()
                .map(|piece| {
                    let (id, turn) = &self.turns[piece.turn];
                    (turn.label.clone(), *id)
                })
                .collect(),
            short_ids: self.context.short_ids.clone(),
            known_texts: self.context.known_texts.clone(),
            n_tokens,
        }
    }
}

/// The turns `shown` (each chunk's elements) carry in parts.
fn split_turns(turns: &[(MessageId, Turn)], shown: &[Vec<Piece>]) -> Vec<SplitTurn> {
    let mut splits: Vec<SplitTurn> = Vec::new();
    for (chunk_index, pieces) in shown.iter().enumerate() {
        for piece in pieces {
            let Some((index, of)) = piece.part else { continue };
            let (id, turn) = &turns[piece.turn];
            if index == 1 {
                let mut whole = String::new();
                Piece::whole(piece.turn, turn).render(turn, &mut whole);
                splits.push(SplitTurn {
                    label: turn.label.clone(),
                    message_id: *id,
                    tokens: count_tokens(&whole),
                    parts: of,
                    chunks: (chunk_index, chunk_index),
                    speaker_left_out: !piece.with_speaker && turn.speaker.is_some(),
                });
            } else if let Some(split) = splits.last_mut() {
                split.chunks.1 = chunk_index;
            }
        }
    }
    splits
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

fn render(turns: &[(MessageId, Turn)], pieces: &[Piece]) -> String {
    let mut out = String::new();
    for piece in pieces {
        piece.render(&turns[piece.turn].1, &mut out);
    }
    out
}

/// The known memories shown, with their short ids, identical for every chunk of a call.
struct MemoryContext {
    short_ids: BTreeMap<String, MemoryId>,
    known_texts: BTreeMap<String, String>,
    /// `(short id, text)` in the caller's order of relevance.
    lines: Vec<(String, String)>,
}

impl MemoryContext {
    /// The first `cap` distinct memories, as many of them, in order, as fit in `room` tokens.
    fn new(known: &[KnownMemory], cap: usize, room: usize) -> Self {
        // The list's heading, and each line's brackets, short id and newline, over its text.
        const HEADING_TOKENS: usize = 16;
        const LINE_TOKENS: usize = 10;
        let mut seen = BTreeSet::new();
        let mut used = HEADING_TOKENS;
        let shown: Vec<&KnownMemory> = known
            .iter()
            .filter(|memory| seen.insert(memory.id))
            .take(cap)
            .take_while(|memory| {
                used += count_tokens(&one_line(&memory.text)) + LINE_TOKENS;
                used <= room
            })
            .collect();
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
