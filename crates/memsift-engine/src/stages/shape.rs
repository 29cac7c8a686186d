//! The store's shape before and after a stage, and the report of one stage run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::StagePlan;
use crate::app::App;

/// Totals that show what post-processing did to a store, for reports before and after a stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StoreShape {
    /// Active memories.
    pub active_memories: i64,
    /// Archived memories.
    pub archived_memories: i64,
    /// Links by kind.
    pub links_by_kind: BTreeMap<String, i64>,
    /// Active entities.
    pub active_entities: i64,
    /// Live segment summaries.
    pub live_summaries: i64,
}

/// Reads the store's shape.
pub async fn store_shape(app: &App) -> anyhow::Result<StoreShape> {
    let shape = app.store.stages().postprocess_shape().await?;
    Ok(StoreShape {
        active_memories: shape.0,
        archived_memories: shape.1,
        links_by_kind: shape.2,
        active_entities: shape.3,
        live_summaries: shape.4,
    })
}

/// What running one stage did: its plan, the store's shape before and after, and how many
/// answers changed the store.
#[derive(Clone, Debug, Serialize)]
pub struct StageRun {
    /// The plan (on a dry run, all there is).
    pub plan: StagePlan,
    /// Before planning.
    pub before: StoreShape,
    /// After the answers were applied (equal to `before` on a dry run or with `--plan-only`).
    pub after: StoreShape,
    /// Answers that changed the store, each one journal row.
    pub n_changes: u64,
}

impl StageRun {
    /// A few lines for a terminal.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let plan = &self.plan;
        let verb = if plan.dry_run { "would plan" } else { "planned" };
        out.push_str(&format!(
            "postprocess {}: {verb} {} request(s) for {} user(s){}{}\n",
            plan.stage,
            plan.n_requests,
            plan.n_users,
            if plan.n_left_by_cap > 0 {
                format!(", {} left for a later run by the per-run cap", plan.n_left_by_cap)
            } else {
                String::new()
            },
            if plan.n_kept > 0 {
                format!(", {} cluster(s) already kept as they are", plan.n_kept)
            } else {
                String::new()
            }
        ));
        if let Some(tokens) = &plan.pair_tokens {
            out.push_str(&format!(
                "  input tokens per classified pair ({} pairs in {} requests, tiktoken o200k_base): {:.1} ({} own + {} instruction tokens, billed in full: shorter than any model's minimum cacheable length), against {:.1} with the same instructions sent once per pair\n",
                tokens.n_pairs,
                tokens.n_requests,
                tokens.ours_per_pair(),
                tokens.ours_uncached,
                tokens.ours_cacheable,
                tokens.reference_per_pair(),
            ));
        }
        if plan.dry_run {
            for line in &plan.planned {
                out.push_str(&format!("  {line}\n"));
            }
            return out;
        }
        let (before, after) = (&self.before, &self.after);
        let mut kinds: Vec<&String> = before.links_by_kind.keys().chain(after.links_by_kind.keys()).collect();
        kinds.sort();
        kinds.dedup();
        let links: Vec<String> = kinds
            .iter()
            .map(|kind| {
                format!(
                    "{kind} {}→{}",
                    before.links_by_kind.get(*kind).unwrap_or(&0),
                    after.links_by_kind.get(*kind).unwrap_or(&0)
                )
            })
            .collect();
        out.push_str(&format!(
            "  {} journaled change(s); active memories {}→{}, archived {}→{}, entities {}→{}, summaries {}→{}\n",
            self.n_changes,
            before.active_memories,
            after.active_memories,
            before.archived_memories,
            after.archived_memories,
            before.active_entities,
            after.active_entities,
            before.live_summaries,
            after.live_summaries,
        ));
        if !links.is_empty() {
            out.push_str(&format!("  links: {}\n", links.join(", ")));
        }
        out
    }
}
