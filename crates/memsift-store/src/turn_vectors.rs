//! Turn vectors: each stored message's embedding, written by the pipeline and read whole per user
//! by search, which keeps them in memory until the user's memory version moves.

use memsift_core::UserId;

use crate::handles::Vectors;
use crate::tx::{Arg, Statement, sql};
use crate::{Result, corrupt, vector_from_le_bytes, vector_to_le_bytes};

/// A message still to embed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnToEmbed {
    /// The message id.
    pub id: String,
    /// Its user.
    pub user_id: UserId,
    /// What to embed.
    pub content: String,
}

/// A user's turn vectors of one model, with the turn version they were read at.
#[derive(Clone, Debug, PartialEq)]
pub struct UserTurnVectors {
    /// `users.turn_version` read before the rows.
    pub version: i64,
    /// (message id, unit-length vector).
    pub rows: Vec<(String, Vec<f32>)>,
}

impl Vectors<'_> {
    /// Up to `limit` messages with no embedding, oldest first.
    pub async fn turns_needing_embedding(self, limit: i64) -> Result<Vec<TurnToEmbed>> {
        let rows: Vec<(String, String, String)> = self
            .read_all(sql!(
                "SELECT id, user_id, content FROM messages WHERE embedding IS NULL
                 ORDER BY created_at, id LIMIT $1",
                limit
            ))
            .await?;
        rows.into_iter()
            .map(|(id, user_id, content)| {
                Ok(TurnToEmbed {
                    id,
                    user_id: UserId::parse(&user_id).map_err(|error| corrupt("messages", error))?,
                    content,
                })
            })
            .collect()
    }

    /// Stores each `(message id, vector)` as made by `model_id`, and bumps the turn version of
    /// every user it touched, so search's cached turn index of that user is read again.
    pub async fn set_turn_embeddings(self, model_id: &str, written: &[(TurnToEmbed, Vec<f32>)]) -> Result<()> {
        if written.is_empty() {
            return Ok(());
        }
        self.write(async |tx| {
            let mut users: Vec<UserId> = Vec::new();
            for (turn, vector) in written {
                tx.execute(sql!(
                    "UPDATE messages SET embedding = $1, embedding_model = $2 WHERE id = $3 AND user_id = $4",
                    vector_to_le_bytes(vector),
                    model_id,
                    turn.id.as_str(),
                    turn.user_id
                ))
                .await?;
                if !users.contains(&turn.user_id) {
                    users.push(turn.user_id);
                }
            }
            for user_id in users {
                tx.execute(sql!(
                    "UPDATE users SET turn_version = turn_version + 1 WHERE id = $1",
                    user_id
                ))
                .await?;
            }
            Ok(())
        })
        .await
    }

    /// `user_id`'s turn version: it moves whenever one of the user's turns or turn vectors is written,
    /// and at erasure.
    pub async fn turn_version(self, user_id: UserId) -> Result<i64> {
        Ok(self
            .read_scalar_optional(sql!("SELECT turn_version FROM users WHERE id = $1", user_id))
            .await?
            .unwrap_or(0))
    }

    /// Every turn vector of `user_id` made by `model_id`, normalised, with the turn version read
    /// first (a concurrent write can only make the result look older, never newer).
    pub async fn user_turn_vectors(self, user_id: UserId, model_id: &str) -> Result<UserTurnVectors> {
        let version = self.turn_version(user_id).await?;
        let rows: Vec<(String, Vec<u8>)> = self
            .read_all(Statement {
                sql: "SELECT id, embedding FROM messages
                      WHERE user_id = $1 AND embedding_model = $2 AND embedding IS NOT NULL",
                args: vec![Arg::from(user_id), Arg::from(model_id)],
            })
            .await?;
        let rows = rows
            .into_iter()
            .filter_map(|(id, bytes)| {
                let mut vector = vector_from_le_bytes(&bytes)?;
                let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
                if norm == 0.0 || !norm.is_finite() {
                    return None;
                }
                vector.iter_mut().for_each(|value| *value /= norm);
                Some((id, vector))
            })
            .collect();
        Ok(UserTurnVectors { version, rows })
    }
}
