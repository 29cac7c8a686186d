//! What happens to the fused ranking, in the order it happens: each stage one small function, with
//! why it exists and the measurement that kept it. A request turns stages off through
//! [`Signals::stages`](super::Signals); `memsift eval retrieval` measures the fusion without each
//! one in turn, and the figures below are from that run on LoCoMo-8 (fusion with turns, share of
//! a question's evidence turns in the top 5 / top 10, against 0.768 / 0.843 with every stage;
//! `memsift eval retrieval LOCOMO8.json --format locomo --only without`, 2026-12-07).

use std::collections::HashMap;

use memsift_core::{MemoryId, MessageId, UserId};
use memsift_store::{MemoryCard, TurnCard};
use serde::Serialize;

use super::fuse::{self, Key, Link, ScoreParts, Weights};
use super::query::TimeRange;
use super::{SearchHit, SearchRequest, diversify, focus, hit, in_window, nearby};
use crate::app::App;
use crate::held::MemoryWords;
use crate::timings::{Phase, timed};

/// One step after fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Importance scales each memory (`importance_prior`): a stated preference outranks small
    /// talk that shares the question's words. LoCoMo-8 cannot measure it (its memories all carry
    /// the importance the benchmark's observations give, so without it: 0.768 / 0.843 all the
    /// same); kept for stores whose scoring and operators set importance, and held by the test
    /// `importance_lifts_a_memory_among_equals`.
    Priors,
    /// Memories linked from the best ones join with part of their score: a question about a move
    /// is answered by what motivated it. LoCoMo-8 barely exercises it: its evaluation store has
    /// no links, and after the offline judge's relationship stage (14 links) recall is 0.768 /
    /// 0.843 with or without it (970 questions fully covered in the top 10 with, 971 without).
    /// Kept for stores a model's relationship stage links, and held by the test
    /// `a_confident_link_brings_its_memory_along_and_says_so`.
    Links,
    /// What was said a turn or two from a top result ranks too: the answer often follows the
    /// turn that shares the question's words. Without it: 0.738 / 0.819.
    Nearby,
    /// The ranked ids become results with their text, evidence and entities (one read for all).
    Cards,
    /// Only results from the request's `since`/`until` window stay.
    Window,
    /// When the question names some of the speakers, results about the others count for less.
    /// Without it: 0.730 / 0.813.
    Speakers,
    /// When the question names a time, results from then count for more (`date_boost`).
    /// Without it: 0.757 / 0.836.
    DateLift,
    /// A result whose evidence an earlier one already shows goes after the rest: it adds a fact
    /// but not a place to look. Without it: 0.764 / 0.842 (968 questions fully covered in the
    /// top 10 against 971).
    Diversify,
}

/// Every stage, in the order a search runs them. Priors come before links (a linked memory
/// inherits its parent's importance-scaled score), links before nearby (a linked memory can be a
/// nearby parent), the cards before the stages that need a result's time, evidence or speakers,
/// and diversity last, on the final scores.
pub const STAGES: [Stage; 8] = [
    Stage::Priors,
    Stage::Links,
    Stage::Nearby,
    Stage::Cards,
    Stage::Window,
    Stage::Speakers,
    Stage::DateLift,
    Stage::Diversify,
];

impl Stage {
    /// The stage's name in reports (`memsift eval retrieval`'s rows, `--timings`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Priors => "priors",
            Stage::Links => "links",
            Stage::Nearby => "nearby",
            Stage::Cards => "cards",
            Stage::Window => "window",
            Stage::Speakers => "speakers",
            Stage::DateLift => "date lift",
            Stage::Diversify => "diversify",
        }
    }

    /// Whether a request can turn this stage off: the cards and the window are what a search
    /// answers, not how it ranks.
    pub fn can_be_off(self) -> bool {
        !matches!(self, Stage::Cards | Stage::Window)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of stages that may be turned off ([`Stage::can_be_off`]); the others always run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stages(u16);

impl Stages {
    /// Every stage.
    pub fn all() -> Self {
        Stages(STAGES.iter().fold(0, |bits, stage| bits | stage.bit()))
    }

    /// Only the stages that always run.
    pub fn none() -> Self {
        Stages(
            STAGES
                .iter()
                .filter(|stage| !stage.can_be_off())
                .fold(0, |bits, stage| bits | stage.bit()),
        )
    }

    /// This set without `stage` (a stage that always runs stays).
    pub fn without(self, stage: Stage) -> Self {
        if stage.can_be_off() {
            Stages(self.0 & !stage.bit())
        } else {
            self
        }
    }

    /// Whether `stage` runs.
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }
}

impl Serialize for Stages {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(STAGES.iter().filter(|stage| self.contains(**stage)))
    }
}

/// A ranking on its way through the stages: the ranked keys until the cards are read, the
/// results after.
pub(super) struct Ranking<'a> {
    pub app: &'a App,
    pub user_id: UserId,
    pub request: &'a SearchRequest,
    pub weights: &'a Weights,
    /// The time the question names, when dates are read.
    pub range: Option<TimeRange>,
    pub memory_words: &'a MemoryWords,
    /// Every candidate and how it was scored, best first (until [`Stage::Cards`]).
    pub ranked: Vec<(Key, ScoreParts)>,
    /// Importance of the memories read so far.
    pub importance: HashMap<MemoryId, f64>,
    /// The links followed, by the memory they reached.
    pub followed: HashMap<MemoryId, Vec<Link>>,
    /// The results, best first (from [`Stage::Cards`] on).
    pub hits: Vec<SearchHit>,
    /// How many candidates reached the cards.
    pub n_candidates: usize,
}

impl Ranking<'_> {
    /// Runs every stage the request keeps, in order.
    pub async fn run(&mut self) -> anyhow::Result<()> {
        for stage in STAGES {
            if self.runs(stage) {
                self.apply(stage).await?;
            }
        }
        Ok(())
    }

    fn runs(&self, stage: Stage) -> bool {
        let weights = self.weights;
        self.request.signals.stages.contains(stage)
            && match stage {
                Stage::Nearby => weights.nearby_factor > 0.0,
                Stage::Window => self.request.since.is_some() || self.request.until.is_some(),
                Stage::Speakers => weights.speaker_focus < 1.0,
                Stage::DateLift => self.range.is_some() && weights.date_boost > 0.0,
                _ => true,
            }
    }

    async fn apply(&mut self, stage: Stage) -> anyhow::Result<()> {
        match stage {
            Stage::Priors => self.priors().await,
            Stage::Links => self.links().await,
            Stage::Nearby => self.nearby().await,
            Stage::Cards => self.cards().await,
            Stage::Window => {
                let (since, until) = (self.request.since, self.request.until);
                self.hits.retain(|hit| in_window(hit, since, until));
                Ok(())
            }
            Stage::Speakers => {
                let named = focus::named_speakers(&self.request.query, &self.hits);
                focus::focus(&mut self.hits, &named, self.weights.speaker_focus);
                Ok(())
            }
            Stage::DateLift => {
                if let Some(range) = self.range {
                    focus::lift_in_range(&mut self.hits, range, self.weights.date_boost);
                }
                Ok(())
            }
            Stage::Diversify => {
                self.hits = diversify(std::mem::take(&mut self.hits));
                Ok(())
            }
        }
    }

    /// The memories among the ranked keys, best first.
    fn memory_keys(&self) -> Vec<MemoryId> {
        super::memory_keys(&self.ranked)
    }

    /// Reads the importance of those of `ids` not read yet (one statement).
    async fn read_importance(&mut self, ids: impl IntoIterator<Item = MemoryId>) -> anyhow::Result<()> {
        let unread: Vec<MemoryId> = ids.into_iter().filter(|id| !self.importance.contains_key(id)).collect();
        if unread.is_empty() {
            return Ok(());
        }
        let _timed = timed(Phase::SearchCards);
        let read = self.app.store.search().importance_of(self.user_id, &unread).await?;
        self.importance.extend(read);
        Ok(())
    }

    async fn priors(&mut self) -> anyhow::Result<()> {
        self.read_importance(self.memory_keys()).await?;
        fuse::apply_priors(&mut self.ranked, &self.importance, self.weights);
        Ok(())
    }

    async fn links(&mut self) -> anyhow::Result<()> {
        let parents: Vec<MemoryId> = self.memory_keys().into_iter().take(self.weights.link_parents).collect();
        let links: Vec<Link> = {
            let _timed = timed(Phase::SearchLinks);
            self.app
                .store
                .search()
                .memory_links_of(self.user_id, &parents)
                .await?
                .into_iter()
                .map(|(from, to, kind, confidence)| Link {
                    from,
                    to,
                    kind,
                    confidence,
                })
                .collect()
        };
        // A linked memory inherits importance from its parent and its own.
        self.read_importance(parents.iter().copied().chain(links.iter().map(|link| link.to)))
            .await?;
        self.followed = fuse::expand_links(&mut self.ranked, &links, &self.importance, self.weights);
        Ok(())
    }

    async fn nearby(&mut self) -> anyhow::Result<()> {
        let _timed = timed(Phase::SearchLinks);
        let nearby = nearby::read(
            self.app,
            self.user_id,
            self.memory_words,
            &self.ranked,
            self.weights,
            self.request.include_turns,
        )
        .await?;
        fuse::expand_nearby(&mut self.ranked, &nearby, self.weights);
        Ok(())
    }

    async fn cards(&mut self) -> anyhow::Result<()> {
        let _timed = timed(Phase::SearchCards);
        let search = self.app.store.search();
        let cards: HashMap<MemoryId, MemoryCard> = search
            .memory_cards(self.user_id, &self.memory_keys())
            .await?
            .into_iter()
            .map(|card| (card.id, card))
            .collect();
        let turn_ids: Vec<MessageId> = self
            .ranked
            .iter()
            .filter_map(|(key, _)| match key {
                Key::Turn(id) => Some(*id),
                Key::Memory(_) => None,
            })
            .collect();
        let turns: HashMap<MessageId, TurnCard> = search
            .turn_cards(self.user_id, &turn_ids)
            .await?
            .into_iter()
            .map(|card| (card.id, card))
            .collect();
        self.n_candidates = self.ranked.len();
        self.hits = std::mem::take(&mut self.ranked)
            .into_iter()
            .filter_map(|(key, parts)| hit(key, parts, &cards, &turns, &self.followed))
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_that_always_runs_cannot_be_turned_off_and_the_others_can() {
        let none = Stages::none();
        for stage in STAGES {
            assert_eq!(none.contains(stage), !stage.can_be_off(), "{stage:?}");
            assert!(Stages::all().contains(stage));
            let without = Stages::all().without(stage);
            assert_eq!(without.contains(stage), !stage.can_be_off(), "{stage:?}");
            for other in STAGES.into_iter().filter(|other| *other != stage) {
                assert!(without.contains(other), "turning {stage:?} off turned {other:?} off");
            }
        }
    }
}
