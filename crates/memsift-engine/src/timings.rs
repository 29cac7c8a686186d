//! A phase timer for `memsift run --until-idle --timings` and `search-bench --timings`: wall time
//! per phase, summed over the run and printed as a tree, so a slow run says where its seconds went.
//!
//! Off unless [`enable`] is called; then a span costs two clock reads and two atomic adds. The
//! sums live in process-wide slots (one per phase) because the phases are spread over modules
//! that share no value but the `App`, and only one run is timed per process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// A part of a run. Each phase is timed inside its parent, so a parent's time covers its
/// children's and the rest is shown as `other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The whole `run --until-idle`.
    Run,
    /// Waiting for due work (pack wait, polls, retry times) through the waiter.
    Waits,
    /// One `run_once`.
    Step,
    /// Claiming closed segments and planning their requests (chunking, known memories).
    Planning,
    /// Finding the user's memories most similar to what the segment's user turns said.
    PlanningSimilar,
    /// The heuristic and immediate lanes.
    Lanes,
    /// The batch coordinator: pack, submit, poll, ingest.
    Coordinator,
    /// Applying every recorded answer.
    Drain,
    /// Reading answers and what processing compares them with (dedupe keys).
    Reads,
    /// Parsing, validation and fuzzy dedupe of answers.
    Processing,
    /// Embedding the items of answers.
    EmbedAnswers,
    /// Loading and searching the users' vector indexes.
    Index,
    /// The apply transactions (and failure records).
    Writes,
    /// Search indexing: embedding stored turns (`[embeddings] embed_turns`), between and after the
    /// steps, never in front of a lane.
    SearchTurns,
    /// Closing idle segments, quotas, health, reviews and re-planning.
    Bookkeeping,
    /// One search (the read side), from the request to its answer.
    Search,
    /// Embedding the query.
    SearchEmbed,
    /// Loading (when stale) and searching the user's memory and turn vector indexes.
    SearchVectors,
    /// BM25 over memory texts (the in-memory lexicon, brought forward when stale).
    SearchLexical,
    /// BM25 over stored turns (the in-memory turn lexicon, brought forward when stale): evidence turns, uncited turns.
    SearchTurnText,
    /// The entity and date lists.
    SearchNamed,
    /// Reading the cards (text, evidence, entities) of the ranked memories and turns.
    SearchCards,
    /// Following typed links from the best memories.
    SearchLinks,
}

impl Phase {
    /// Every phase, each after its parent: the order of the printed tree.
    pub const ALL: [Phase; 23] = [
        Phase::Run,
        Phase::Waits,
        Phase::Step,
        Phase::Planning,
        Phase::PlanningSimilar,
        Phase::Lanes,
        Phase::Coordinator,
        Phase::Drain,
        Phase::Reads,
        Phase::Processing,
        Phase::EmbedAnswers,
        Phase::Index,
        Phase::Writes,
        Phase::SearchTurns,
        Phase::Bookkeeping,
        Phase::Search,
        Phase::SearchEmbed,
        Phase::SearchVectors,
        Phase::SearchLexical,
        Phase::SearchTurnText,
        Phase::SearchNamed,
        Phase::SearchCards,
        Phase::SearchLinks,
    ];

    /// The phase's slot in the sums.
    pub fn slot(self) -> usize {
        self as usize
    }

    /// The phase this one is timed inside.
    pub fn parent(self) -> Option<Phase> {
        match self {
            Phase::Run | Phase::Search => None,
            Phase::Waits | Phase::Step | Phase::SearchTurns => Some(Phase::Run),
            Phase::Planning | Phase::Lanes | Phase::Coordinator | Phase::Drain | Phase::Bookkeeping => {
                Some(Phase::Step)
            }
            Phase::PlanningSimilar => Some(Phase::Planning),
            Phase::Reads | Phase::Processing | Phase::EmbedAnswers | Phase::Index | Phase::Writes => Some(Phase::Drain),
            Phase::SearchEmbed
            | Phase::SearchVectors
            | Phase::SearchLexical
            | Phase::SearchTurnText
            | Phase::SearchNamed
            | Phase::SearchCards
            | Phase::SearchLinks => Some(Phase::Search),
        }
    }

    /// The phase's name in the printed tree.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Run => "run --until-idle",
            Phase::Waits => "waits for due work",
            Phase::Step => "pipeline steps",
            Phase::Planning => "planning",
            Phase::PlanningSimilar => "similar memories (stored turn vectors or BM25)",
            Phase::Lanes => "heuristic and immediate lanes",
            Phase::Coordinator => "batch coordinator",
            Phase::Drain => "applying answers",
            Phase::Reads => "reads (answers, dedupe keys)",
            Phase::Processing => "processing (parse, validate, fuzzy dedupe)",
            Phase::EmbedAnswers => "embedding answers' items",
            Phase::Index => "vector indexes (load, search)",
            Phase::Writes => "writes (apply transactions)",
            Phase::SearchTurns => "search indexing (embedding stored turns)",
            Phase::Bookkeeping => "bookkeeping (close, quotas, health, reviews, replan)",
            Phase::Search => "searches",
            Phase::SearchEmbed => "embedding the query",
            Phase::SearchVectors => "vector indexes (memories, turns)",
            Phase::SearchLexical => "BM25 over memory texts (lexicon)",
            Phase::SearchTurnText => "BM25 over turns (lexicon; evidence, uncited)",
            Phase::SearchNamed => "entity and date lists",
            Phase::SearchCards => "cards (texts, evidence, entities)",
            Phase::SearchLinks => "links and nearby turns followed",
        }
    }
}

const N_PHASES: usize = Phase::ALL.len();
static ENABLED: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; N_PHASES] = [const { AtomicU64::new(0) }; N_PHASES];
static COUNTS: [AtomicU64; N_PHASES] = [const { AtomicU64::new(0) }; N_PHASES];
/// Store statements run inside each phase: a phase's wall time on a database across a network
/// is mostly its round trips, so the count says what batching would save.
static STATEMENTS: [AtomicU64; N_PHASES] = [const { AtomicU64::new(0) }; N_PHASES];

/// Starts timing for the rest of the process.
pub fn enable() {
    ENABLED.store(true, Ordering::SeqCst);
}

/// Forgets every sum so far (a bench leaves its warm-up out).
pub fn reset() {
    for slot in 0..N_PHASES {
        NANOS[slot].store(0, Ordering::Relaxed);
        COUNTS[slot].store(0, Ordering::Relaxed);
        STATEMENTS[slot].store(0, Ordering::Relaxed);
    }
}

/// Times `phase` until the returned guard is dropped; nothing when timing is off.
pub fn timed(phase: Phase) -> Option<Span> {
    ENABLED.load(Ordering::Relaxed).then(|| Span {
        phase,
        started: Instant::now(),
        statements_before: memsift_store::statements_run(),
    })
}

/// A phase being timed; adds its wall time when dropped.
#[must_use = "the phase is timed until the span is dropped"]
pub struct Span {
    phase: Phase,
    started: Instant,
    statements_before: u64,
}

impl Drop for Span {
    fn drop(&mut self) {
        let slot = self.phase.slot();
        NANOS[slot].fetch_add(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        COUNTS[slot].fetch_add(1, Ordering::Relaxed);
        let statements = memsift_store::statements_run().saturating_sub(self.statements_before);
        STATEMENTS[slot].fetch_add(statements, Ordering::Relaxed);
    }
}

/// The wall seconds spent in `phase` since the last [`reset`].
pub fn seconds(phase: Phase) -> f64 {
    NANOS[phase.slot()].load(Ordering::Relaxed) as f64 / 1e9
}

/// The tree of phases with their seconds, share of the parent and count; phases never entered
/// are left out, and a parent's time not covered by its children is shown as `other`.
pub fn report() -> String {
    let mut out = String::from("timings: wall seconds, share of the parent, times entered, store statements run\n");
    print_children(&mut out, None, 0, &seconds);
    out
}

fn print_children(out: &mut String, parent: Option<Phase>, depth: usize, seconds: &dyn Fn(Phase) -> f64) {
    let children: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|phase| phase.parent() == parent && COUNTS[phase.slot()].load(Ordering::Relaxed) > 0)
        .collect();
    let parent_secs = parent.map(seconds);
    let share = |secs: f64| match parent_secs {
        Some(total) if total > 0.0 => format!("{:5.1} %", 100.0 * secs / total),
        _ => "       ".to_owned(),
    };
    let indent = "  ".repeat(depth);
    for &phase in &children {
        let secs = seconds(phase);
        let label = format!("{indent}{}", phase.label());
        out.push_str(&format!(
            "  {label:<56} {secs:8.2} s {} {:>7} {:>9}\n",
            share(secs),
            COUNTS[phase.slot()].load(Ordering::Relaxed),
            STATEMENTS[phase.slot()].load(Ordering::Relaxed)
        ));
        print_children(out, Some(phase), depth + 1, seconds);
    }
    if let (Some(total), false) = (parent_secs, children.is_empty()) {
        let other = (total - children.iter().map(|&phase| seconds(phase)).sum::<f64>()).max(0.0);
        let label = format!("{indent}other");
        out.push_str(&format!("  {label:<56} {other:8.2} s {}\n", share(other)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_has_its_own_slot_and_a_parent_listed_before_it() {
        for (position, phase) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(phase.slot(), position, "{phase:?} is listed at its slot");
            if let Some(parent) = phase.parent() {
                assert!(parent.slot() < position, "{phase:?}'s parent {parent:?} comes first");
            }
        }
        let roots: Vec<Phase> = Phase::ALL
            .into_iter()
            .filter(|phase| phase.parent().is_none())
            .collect();
        assert_eq!(
            roots,
            [Phase::Run, Phase::Search],
            "one tree for runs, one for searches"
        );
        let labels: std::collections::HashSet<_> = Phase::ALL.iter().map(|phase| phase.label()).collect();
        assert_eq!(labels.len(), Phase::ALL.len(), "every label names one phase");
    }
}
