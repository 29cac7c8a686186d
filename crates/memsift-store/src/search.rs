//! The read side's queries: lexical matches over memory texts and uncited turns, entities and
//! times a query names, and each result's card (text, evidence turns, entities, links).
//!
//! The lexical index is SQLite FTS5 (external content, so each text is stored once, with the
//! Porter stemmer; ranked by BM25) or PostgreSQL full text (a generated `tsvector` with a GIN
//! index, English configuration; ranked by `ts_rank_cd`). Both are kept by the database itself in
//! the transaction that writes the row (triggers; a generated column), so no write path can
//! forget them. Every query here is scoped by user in its SQL.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use memsift_core::{MemoryId, UserId};

use crate::handles::Search;
use crate::turn_vectors::StampState;
use crate::tx::{Arg, Statement};
use crate::{BackendKind, Result, corrupt};

/// A memory row as a lexicon reads it: id, text, and 1 when active (0 when retired).
type StampedText = (String, String, i64);

/// Memory texts for a lexicon, as [`Search::memory_texts_since`] reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryTexts {
    /// Active memories written or changed: (id, text, what its evidence turns said, joined).
    pub changed: Vec<(MemoryId, String, String)>,
    /// Memories that stopped being active (archived, superseded).
    pub gone: Vec<MemoryId>,
}

/// A memory as a search result shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryCard {
    /// The memory.
    pub id: MemoryId,
    /// Its text.
    pub text: String,
    /// Importance (0–1).
    pub importance: f64,
    /// When it happens, if it says.
    pub happens_at: Option<DateTime<Utc>>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// The turns it rests on, in the order they were said.
    pub evidence: Vec<TurnCard>,
    /// The entities it names.
    pub entities: Vec<String>,
}

/// A stored turn as evidence or as a result.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnCard {
    /// The message id.
    pub id: String,
    /// The source's message id, else `t<seq>`.
    pub label: String,
    /// `user`, `assistant`, …
    pub role: String,
    /// The speaker's name, when given.
    pub speaker: Option<String>,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// What was said.
    pub text: String,
}

/// A stored turn's words, for the in-memory lexical index over turns.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnText {
    /// The message id.
    pub id: String,
    /// Its segment (conversation stretch): a turn's neighbours are read within it.
    pub segment_id: String,
    /// The speaker's name, when given.
    pub speaker: Option<String>,
    /// What was said.
    pub text: String,
}

/// ` IN <the ids bound as one JSON array at parameter $at>`, to follow a column. One statement text
/// for any number of ids: an `IN ($2, …, $101)` list was a new prepared statement for every length.
/// On PostgreSQL the set is an array built once (`= ANY(ARRAY(…))`), which an index scan takes as
/// its key; `IN (SELECT …)` was planned as a join over the whole table (90 ms at 10k memories).
fn in_set(kind: BackendKind, at: usize) -> String {
    match kind {
        BackendKind::Sqlite => format!(" IN (SELECT value FROM json_each(${at}))"),
        BackendKind::Postgres => format!(" = ANY(ARRAY(SELECT jsonb_array_elements_text(${at})))"),
    }
}

/// The ids for an [`id_set`] parameter.
fn ids_arg<T: ToString>(ids: impl IntoIterator<Item = T>) -> Arg {
    let ids: Vec<String> = ids.into_iter().map(|id| id.to_string()).collect();
    Arg::json(&ids)
}

/// The lexical query for `terms`, any of which may match: FTS5 quoted strings joined by `OR`
/// (a quoted string is matched as text, never as query syntax), or words joined by `or` for
/// PostgreSQL's `websearch_to_tsquery`, which reads any text without a syntax error.
fn lexical_query(kind: BackendKind, terms: &[String]) -> String {
    match kind {
        BackendKind::Sqlite => terms
            .iter()
            .map(|term| format!("\"{}\"", term.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR "),
        BackendKind::Postgres => terms
            .iter()
            .map(|term| term.replace(['"', '-', '\''], " "))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// `column` as a filter that the query planner must not pick an index for. Card and link queries
/// name a hundred ids at most and check the user as well; without statistics (a fresh or freshly
/// filled table) both planners preferred the user's index and read all their rows (10k memories,
/// every message) to find those ids, where the primary key finds them directly. A unary `+` is
/// SQLite's documented way to say so; PostgreSQL has no planner hints, and an expression is not
/// what its index holds.
fn not_indexed(kind: BackendKind, column: &str) -> String {
    match kind {
        BackendKind::Sqlite => format!("+{column}"),
        BackendKind::Postgres => format!("({column} || '')"),
    }
}

type TurnRow = (
    String,
    Option<String>,
    i64,
    String,
    Option<String>,
    DateTime<Utc>,
    String,
);

fn turn_card(row: TurnRow) -> TurnCard {
    let (id, external_id, seq, role, speaker, at, text) = row;
    TurnCard {
        id,
        label: external_id.unwrap_or_else(|| format!("t{seq}")),
        role,
        speaker,
        at,
        text,
    }
}

impl Search<'_> {
    /// `user_id`'s active memories matching any of `terms`, best first, with a score where higher
    /// is better (BM25 negated on SQLite, `ts_rank_cd` on PostgreSQL).
    pub async fn lexical_memories(self, user_id: UserId, terms: &[String], limit: i64) -> Result<Vec<(MemoryId, f64)>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let query = lexical_query(self.kind(), terms);
        let sql = match self.kind() {
            BackendKind::Sqlite => {
                "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts
                 JOIN memories m ON m.search_rowid = memories_fts.rowid
                 WHERE memories_fts MATCH $1 AND m.user_id = $2 AND m.archived_at IS NULL
                 ORDER BY bm25(memories_fts), m.id LIMIT $3"
            }
            BackendKind::Postgres => {
                "SELECT m.id, CAST(ts_rank_cd(m.text_search, q) AS DOUBLE PRECISION) AS score
                 FROM memories m, websearch_to_tsquery('english', $1) q
                 WHERE m.text_search @@ q AND m.user_id = $2 AND m.archived_at IS NULL
                 ORDER BY score DESC, m.id LIMIT $3"
            }
        };
        let rows: Vec<(String, f64)> = self
            .read_all(Statement {
                sql,
                args: vec![Arg::from(query), Arg::from(user_id), Arg::from(limit)],
            })
            .await?;
        rows.into_iter()
            .map(|(id, score)| Ok((MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?, score)))
            .collect()
    }

    /// What a memory lexicon built at `since` must re-read (every active memory with `None`): the
    /// active memories stamped after it, as (id, text, what its evidence turns said, joined), and
    /// the memories stamped after it that are no longer active. The memory version and floor are
    /// read first, so the rows are at least as new as they say; a caller bringing a lexicon
    /// forward checks `since` against this floor, not one read before.
    pub async fn memory_texts_since(self, user_id: UserId, since: Option<i64>) -> Result<(StampState, MemoryTexts)> {
        let state = self.vectors().memory_state(user_id).await?;
        // (id, text, 1 when active). With `since`, the conditions are the user and the stamp
        // only, archived rows included: on PostgreSQL a generic plan otherwise took the user's
        // active-memory index and filtered every row of theirs by stamp (100 ms at 100k).
        let (rows, evidence): (Vec<StampedText>, Vec<(String, String)>) = match since {
            None => (
                self.read_all(crate::tx::sql!(
                    "SELECT id, text, CAST(1 AS BIGINT) FROM memories
                     WHERE user_id = $1 AND archived_at IS NULL ORDER BY id",
                    user_id
                ))
                .await?,
                self.read_all(crate::tx::sql!(
                    "SELECT e.memory_id, msg.content FROM memory_evidence e
                     JOIN memories m ON m.id = e.memory_id JOIN messages msg ON msg.id = e.message_id
                     WHERE m.user_id = $1 AND m.archived_at IS NULL ORDER BY msg.created_at, msg.seq",
                    user_id
                ))
                .await?,
            ),
            Some(since) => (
                self.read_all(crate::tx::sql!(
                    "SELECT id, text, CAST(CASE WHEN archived_at IS NULL THEN 1 ELSE 0 END AS BIGINT) FROM memories
                     WHERE user_id = $1 AND memory_stamp > $2 ORDER BY id",
                    user_id,
                    since
                ))
                .await?,
                self.read_all(crate::tx::sql!(
                    "SELECT e.memory_id, msg.content FROM memories m
                     JOIN memory_evidence e ON e.memory_id = m.id JOIN messages msg ON msg.id = e.message_id
                     WHERE m.user_id = $1 AND m.memory_stamp > $2 ORDER BY msg.created_at, msg.seq",
                    user_id,
                    since
                ))
                .await?,
            ),
        };
        let mut said: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for (id, content) in evidence {
            let joined = said.entry(id).or_default();
            if !joined.is_empty() {
                joined.push('\n');
            }
            joined.push_str(&content);
        }
        let parse = |id: &str| MemoryId::parse(id).map_err(|error| corrupt("memories", error));
        let mut texts = MemoryTexts::default();
        for (id, text, active) in rows {
            if active == 1 {
                let said = said.remove(&id).unwrap_or_default();
                texts.changed.push((parse(&id)?, text, said));
            } else {
                texts.gone.push(parse(&id)?);
            }
        }
        Ok((state, texts))
    }

    /// Every turn of `user_id` as (id, segment, speaker, text), in conversation order, with the
    /// turn version read first (a concurrent write can only make the result look older).
    pub async fn user_turn_texts(self, user_id: UserId) -> Result<(i64, Vec<TurnText>)> {
        let (state, turns) = self.turn_texts_since(user_id, None).await?;
        Ok((state.version, turns))
    }

    /// The turns of every segment of `user_id` that has a turn stamped after `since` (all of them
    /// with `None`), whole and in conversation order, with the turn version read first: what a
    /// turn index built at `since` must re-read, since a new turn also changes its neighbour's
    /// context. The state is read first, so the rows are at least as new as it says; a caller
    /// bringing an index forward checks `since` against this floor, not one read before.
    pub async fn turn_texts_since(self, user_id: UserId, since: Option<i64>) -> Result<(StampState, Vec<TurnText>)> {
        let state = self.vectors().turn_state(user_id).await?;
        let rows: Vec<(String, String, Option<String>, String)> = match since {
            None => {
                self.read_all(crate::tx::sql!(
                    "SELECT id, segment_id, speaker, content FROM messages WHERE user_id = $1 ORDER BY segment_id, seq",
                    user_id
                ))
                .await?
            }
            Some(since) => {
                self.read_all(crate::tx::sql!(
                    "SELECT id, segment_id, speaker, content FROM messages
                     WHERE user_id = $1 AND segment_id IN
                           (SELECT segment_id FROM messages WHERE user_id = $1 AND turn_stamp > $2)
                     ORDER BY segment_id, seq",
                    user_id,
                    since
                ))
                .await?
            }
        };
        let turns = rows
            .into_iter()
            .map(|(id, segment_id, speaker, text)| TurnText {
                id,
                segment_id,
                speaker,
                text,
            })
            .collect();
        Ok((state, turns))
    }

    /// The names of the speakers of `user_id`'s turns stamped after `since`, with the turn version
    /// and floor read first: what a held turn lexicon at `since` lacks of its speakers, when the
    /// floor says no turn went away since.
    pub async fn speakers_since(self, user_id: UserId, since: i64) -> Result<(StampState, BTreeSet<String>)> {
        let state = self.vectors().turn_state(user_id).await?;
        if state.version == since {
            // Nothing stamped since: no second round trip on a search whose lexicon is current.
            return Ok((state, BTreeSet::new()));
        }
        let names: Vec<(String,)> = self
            .read_all(crate::tx::sql!(
                "SELECT DISTINCT speaker FROM messages
                 WHERE user_id = $1 AND turn_stamp > $2 AND speaker IS NOT NULL",
                user_id,
                since
            ))
            .await?;
        Ok((state, names.into_iter().map(|(name,)| name).collect()))
    }

    /// `user_id`'s turns that no active memory cites, matching any of `terms`, best first.
    pub async fn lexical_turns(self, user_id: UserId, terms: &[String], limit: i64) -> Result<Vec<(String, f64)>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let query = lexical_query(self.kind(), terms);
        let uncited = "NOT EXISTS (SELECT 1 FROM memory_evidence e JOIN memories m ON m.id = e.memory_id
                        WHERE e.message_id = msg.id AND m.archived_at IS NULL)";
        let sql = match self.kind() {
            BackendKind::Sqlite => format!(
                "SELECT msg.id, -bm25(messages_fts) AS score FROM messages_fts
                 JOIN messages msg ON msg.search_rowid = messages_fts.rowid
                 WHERE messages_fts MATCH $1 AND msg.user_id = $2 AND {uncited}
                 ORDER BY bm25(messages_fts), msg.id LIMIT $3"
            ),
            BackendKind::Postgres => format!(
                "SELECT msg.id, CAST(ts_rank_cd(msg.content_search, q) AS DOUBLE PRECISION) AS score
                 FROM messages msg, websearch_to_tsquery('english', $1) q
                 WHERE msg.content_search @@ q AND msg.user_id = $2 AND {uncited}
                 ORDER BY score DESC, msg.id LIMIT $3"
            ),
        };
        self.read_all(Statement {
            sql: &sql,
            args: vec![Arg::from(query), Arg::from(user_id), Arg::from(limit)],
        })
        .await
    }

    /// `user_id`'s active memories whose evidence turns match any of `terms`, ranked by their
    /// best-matching turn: what was said can match a question a memory's wording no longer does.
    pub async fn memories_by_evidence_text(
        self,
        user_id: UserId,
        terms: &[String],
        limit: i64,
    ) -> Result<Vec<(MemoryId, f64)>> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let query = lexical_query(self.kind(), terms);
        let sql = match self.kind() {
            BackendKind::Sqlite => {
                // FTS5's bm25() cannot be aggregated: the turns are ranked first, then grouped.
                "SELECT m.id, MAX(hit.score) AS score FROM (
                     SELECT msg.id AS message_id, -bm25(messages_fts) AS score FROM messages_fts
                     JOIN messages msg ON msg.search_rowid = messages_fts.rowid
                     WHERE messages_fts MATCH $1 AND msg.user_id = $2
                     ORDER BY bm25(messages_fts) LIMIT $3 * 4
                 ) hit
                 JOIN memory_evidence e ON e.message_id = hit.message_id
                 JOIN memories m ON m.id = e.memory_id
                 WHERE m.archived_at IS NULL
                 GROUP BY m.id ORDER BY score DESC, m.id LIMIT $3"
            }
            BackendKind::Postgres => {
                "SELECT m.id, MAX(CAST(ts_rank_cd(msg.content_search, q) AS DOUBLE PRECISION)) AS score
                 FROM messages msg, websearch_to_tsquery('english', $1) q, memory_evidence e, memories m
                 WHERE msg.content_search @@ q AND msg.user_id = $2 AND e.message_id = msg.id
                   AND m.id = e.memory_id AND m.archived_at IS NULL
                 GROUP BY m.id ORDER BY score DESC, m.id LIMIT $3"
            }
        };
        let rows: Vec<(String, f64)> = self
            .read_all(Statement {
                sql,
                args: vec![Arg::from(query), Arg::from(user_id), Arg::from(limit)],
            })
            .await?;
        rows.into_iter()
            .map(|(id, score)| Ok((MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?, score)))
            .collect()
    }

    /// `user_id`'s active memories joined to an active entity whose every name word is among
    /// `terms`, with how many such entities each names, most first.
    pub async fn entity_memories(self, user_id: UserId, terms: &[String], limit: i64) -> Result<Vec<(MemoryId, i64)>> {
        let entities: Vec<(String, String)> = self
            .read_all(crate::tx::sql!(
                "SELECT id, normalized_name FROM entities WHERE user_id = $1 AND archived_at IS NULL",
                user_id
            ))
            .await?;
        let named: Vec<String> = entities
            .into_iter()
            .filter(|(_, name)| {
                let words: Vec<&str> = name
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .collect();
                !words.is_empty() && words.iter().all(|word| terms.iter().any(|term| term == word))
            })
            .map(|(id, _)| id)
            .collect();
        if named.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT m.id, COUNT(*) AS n FROM memory_entities me JOIN memories m ON m.id = me.memory_id
             WHERE {} = $1 AND m.archived_at IS NULL AND me.entity_id{}
             GROUP BY m.id ORDER BY n DESC, m.importance DESC, m.id LIMIT $2",
            not_indexed(self.kind(), "m.user_id"),
            in_set(self.kind(), 3)
        );
        let args = vec![Arg::from(user_id), Arg::from(limit), ids_arg(named)];
        let rows: Vec<(String, i64)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(id, n)| Ok((MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?, n)))
            .collect()
    }

    /// `user_id`'s active memories whose time is in `[from, to)`: when they happen, else when
    /// their earliest evidence was said; with that time.
    pub async fn memories_in_range(
        self,
        user_id: UserId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<(MemoryId, DateTime<Utc>)>> {
        let rows: Vec<(String, DateTime<Utc>)> = self
            .read_all(crate::tx::sql!(
                "SELECT id, at FROM (
                     SELECT m.id, COALESCE(m.happens_at,
                         (SELECT MIN(msg.created_at) FROM memory_evidence e JOIN messages msg ON msg.id = e.message_id
                          WHERE e.memory_id = m.id)) AS at
                     FROM memories m WHERE m.user_id = $1 AND m.archived_at IS NULL
                 ) timed
                 WHERE at >= $2 AND at < $3 ORDER BY at, id LIMIT $4",
                user_id,
                from,
                to,
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, at)| Ok((MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?, at)))
            .collect()
    }

    /// The turns said within `span` places of each of `turn_ids` (`user_id`'s messages) in the
    /// same segment, as (turn, neighbour, places after it: negative before, whether the
    /// same speaker said both), the turn itself left out. Turns with no speaker's name (an
    /// assistant's chat, where the roles say who spoke) are the same speaker's when their roles
    /// are the same.
    pub async fn turn_neighbours(
        self,
        user_id: UserId,
        turn_ids: &[String],
        span: i64,
    ) -> Result<Vec<(String, String, i64, bool)>> {
        if turn_ids.is_empty() || span <= 0 {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT o.id, n.id, n.seq - o.seq,
                    CASE WHEN n.speaker = o.speaker
                              OR (n.speaker IS NULL AND o.speaker IS NULL AND n.role = o.role)
                         THEN TRUE ELSE FALSE END
             FROM messages o
             JOIN messages n ON n.segment_id = o.segment_id AND n.seq >= o.seq - $3 AND n.seq <= o.seq + $3
             WHERE {} = $1 AND o.id{} AND n.id <> o.id
             ORDER BY o.id, n.seq",
            not_indexed(self.kind(), "o.user_id"),
            in_set(self.kind(), 2)
        );
        let args = vec![Arg::from(user_id), ids_arg(turn_ids), Arg::from(span)];
        self.read_all(Statement { sql: &sql, args }).await
    }

    /// Which of `turn_ids` (`user_id`'s messages) active memories cite, as (turn id, memory).
    pub async fn turn_citations(self, user_id: UserId, turn_ids: &[String]) -> Result<Vec<(String, MemoryId)>> {
        if turn_ids.is_empty() {
            return Ok(Vec::new());
        }
        let user_check = not_indexed(self.kind(), "m.user_id");
        let sql = match self.kind() {
            BackendKind::Sqlite => format!(
                "SELECT e.message_id, m.id FROM memory_evidence e JOIN memories m ON m.id = e.memory_id
                 WHERE {user_check} = $1 AND m.archived_at IS NULL AND e.message_id{}",
                in_set(self.kind(), 2)
            ),
            // Without statistics (a freshly filled table) PostgreSQL took the user's active
            // memories for one row and read every one of them, probing the evidence for each (1 s
            // a search at 10k memories). `OFFSET 0` keeps the memory lookup a subquery of its own,
            // and the unindexed user check keeps it on the primary key (the user's index read
            // every memory of theirs per probe, 10 ms at 1k), once per evidence row the turn ids
            // find (2 ms).
            BackendKind::Postgres => format!(
                "SELECT e.message_id, m.id FROM memory_evidence e
                 CROSS JOIN LATERAL (SELECT m.id FROM memories m
                                     WHERE m.id = e.memory_id AND {user_check} = $1 AND m.archived_at IS NULL
                                     OFFSET 0) m
                 WHERE e.message_id{}",
                in_set(self.kind(), 2)
            ),
        };
        let args = vec![Arg::from(user_id), ids_arg(turn_ids)];
        let rows: Vec<(String, String)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(turn, id)| Ok((turn, MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?)))
            .collect()
    }

    /// The cards of those of `ids` that are `user_id`'s active memories, in no set order.
    pub async fn memory_cards(self, user_id: UserId, ids: &[MemoryId]) -> Result<Vec<MemoryCard>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = in_set(self.kind(), 2);
        let with_ids = |sql: String| (sql, vec![Arg::from(user_id), ids_arg(ids)]);
        let user = |column: &str| not_indexed(self.kind(), column);
        let (sql, args) = with_ids(format!(
            "SELECT id, text, importance, happens_at, created_at FROM memories
             WHERE {} = $1 AND archived_at IS NULL AND id{list}",
            user("user_id")
        ));
        type CardRow = (String, String, f64, Option<DateTime<Utc>>, DateTime<Utc>);
        let rows: Vec<CardRow> = self.read_all(Statement { sql: &sql, args }).await?;
        let (sql, args) = with_ids(format!(
            "SELECT e.memory_id, msg.id, msg.external_id, msg.seq, msg.role, msg.speaker, msg.created_at, msg.content
             FROM memory_evidence e JOIN messages msg ON msg.id = e.message_id
             WHERE {} = $1 AND e.memory_id{list} ORDER BY msg.created_at, msg.seq",
            user("msg.user_id")
        ));
        type EvidenceRow = (
            String,
            String,
            Option<String>,
            i64,
            String,
            Option<String>,
            DateTime<Utc>,
            String,
        );
        let evidence: Vec<EvidenceRow> = self.read_all(Statement { sql: &sql, args }).await?;
        let (sql, args) = with_ids(format!(
            "SELECT me.memory_id, en.name FROM memory_entities me JOIN entities en ON en.id = me.entity_id
             WHERE {} = $1 AND me.memory_id{list} ORDER BY en.name",
            user("en.user_id")
        ));
        let entities: Vec<(String, String)> = self.read_all(Statement { sql: &sql, args }).await?;
        rows.into_iter()
            .map(|(id, text, importance, happens_at, created_at)| {
                let memory_id = MemoryId::parse(&id).map_err(|error| corrupt("memories", error))?;
                Ok(MemoryCard {
                    id: memory_id,
                    text,
                    importance,
                    happens_at,
                    created_at,
                    evidence: evidence
                        .iter()
                        .filter(|row| row.0 == id)
                        .map(|row| {
                            turn_card((
                                row.1.clone(),
                                row.2.clone(),
                                row.3,
                                row.4.clone(),
                                row.5.clone(),
                                row.6,
                                row.7.clone(),
                            ))
                        })
                        .collect(),
                    entities: entities
                        .iter()
                        .filter(|row| row.0 == id)
                        .map(|row| row.1.clone())
                        .collect(),
                })
            })
            .collect()
    }

    /// The cards of those of `ids` that are `user_id`'s turns.
    pub async fn turn_cards(self, user_id: UserId, ids: &[String]) -> Result<Vec<TurnCard>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, external_id, seq, role, speaker, created_at, content FROM messages
             WHERE {} = $1 AND id{}",
            not_indexed(self.kind(), "user_id"),
            in_set(self.kind(), 2)
        );
        let args = vec![Arg::from(user_id), ids_arg(ids)];
        let rows: Vec<TurnRow> = self.read_all(Statement { sql: &sql, args }).await?;
        Ok(rows.into_iter().map(turn_card).collect())
    }

    /// The links of `ids` to other active memories of `user_id`, in either direction, as
    /// `(one of ids, the other memory, kind, confidence)`.
    pub async fn memory_links_of(
        self,
        user_id: UserId,
        ids: &[MemoryId],
    ) -> Result<Vec<(MemoryId, MemoryId, String, f64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // Links are read through each end's index alone, then both ends checked against the
        // user's active memories by primary key. Joining `memories` twice in the same statement
        // let PostgreSQL plan a product of the user's memories with themselves (0.5 s at 1k
        // memories, 50 s at 10k), whatever way the link condition was written.
        let list = in_set(self.kind(), 1);
        let mut rows: Vec<(String, String, String, f64)> = Vec::new();
        for end in ["source_id", "target_id"] {
            let sql = format!("SELECT source_id, target_id, kind, confidence FROM memory_links WHERE {end}{list}");
            let args = vec![ids_arg(ids)];
            rows.extend(
                self.read_all::<(String, String, String, f64)>(Statement { sql: &sql, args })
                    .await?,
            );
        }
        let ends: std::collections::BTreeSet<&str> =
            rows.iter().flat_map(|row| [row.0.as_str(), row.1.as_str()]).collect();
        let active: std::collections::HashSet<String> = if ends.is_empty() {
            std::collections::HashSet::new()
        } else {
            let sql = format!(
                "SELECT id FROM memories WHERE {} = $1 AND archived_at IS NULL AND id{}",
                not_indexed(self.kind(), "user_id"),
                in_set(self.kind(), 2)
            );
            let args = vec![Arg::from(user_id), ids_arg(&ends)];
            let found: Vec<(String,)> = self.read_all(Statement { sql: &sql, args }).await?;
            found.into_iter().map(|(id,)| id).collect()
        };
        rows.retain(|row| active.contains(&row.0) && active.contains(&row.1));
        // A link between two wanted memories came back from both lookups.
        rows.sort_by(|a, b| {
            b.3.total_cmp(&a.3)
                .then_with(|| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)))
        });
        rows.dedup_by(|a, b| (&a.0, &a.1, &a.2) == (&b.0, &b.1, &b.2));
        let wanted: std::collections::HashSet<String> = ids.iter().map(ToString::to_string).collect();
        let parse = |id: &str| MemoryId::parse(id).map_err(|error| corrupt("memory_links", error));
        let mut out = Vec::new();
        for (source, target, kind, confidence) in rows {
            if wanted.contains(&source) {
                out.push((parse(&source)?, parse(&target)?, kind.clone(), confidence));
            }
            if wanted.contains(&target) {
                out.push((parse(&target)?, parse(&source)?, kind, confidence));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_queries_quote_every_term_so_no_text_is_query_syntax() {
        let terms = vec!["caroline".to_owned(), "ne\"ar".to_owned(), "or".to_owned()];
        assert_eq!(
            lexical_query(BackendKind::Sqlite, &terms),
            "\"caroline\" OR \"ne\"\"ar\" OR \"or\""
        );
        assert_eq!(lexical_query(BackendKind::Postgres, &terms), "caroline or ne ar or or");
        assert_eq!(in_set(BackendKind::Sqlite, 3), " IN (SELECT value FROM json_each($3))");
    }
}
