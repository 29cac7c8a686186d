//! The batches and files the simulator keeps for each provider, and how each provider shows them:
//! the state holds them, the wire-format handlers change them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcessingStatus {
    InProgress,
    Canceling,
    Ended,
}

impl ProcessingStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProcessingStatus::InProgress => "in_progress",
            ProcessingStatus::Canceling => "canceling",
            ProcessingStatus::Ended => "ended",
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) succeeded: u64,
    pub(crate) errored: u64,
    pub(crate) canceled: u64,
    pub(crate) expired: u64,
}

pub(crate) struct AnthropicBatch {
    pub(crate) id: String,
    pub(crate) status: ProcessingStatus,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) ready_at: DateTime<Utc>,
    pub(crate) ended_at: Option<DateTime<Utc>>,
    pub(crate) cancel_initiated_at: Option<DateTime<Utc>>,
    pub(crate) requests: Vec<(String, Value)>,
    pub(crate) results: Vec<String>,
    pub(crate) counts: Counts,
    pub(crate) not_found_remaining: u32,
}

pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl AnthropicBatch {
    pub(crate) fn to_json(&self, base_url: &str) -> Value {
        let ended = self.status == ProcessingStatus::Ended;
        // Counts other than `processing` stay zero until the whole batch ends, as the provider's do.
        let counts = if ended {
            json!({"processing": 0, "succeeded": self.counts.succeeded, "errored": self.counts.errored,
                   "canceled": self.counts.canceled, "expired": self.counts.expired})
        } else {
            json!({"processing": self.requests.len(), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0})
        };
        json!({
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status.as_str(),
            "request_counts": counts,
            "ended_at": self.ended_at.map(timestamp),
            "created_at": timestamp(self.created_at),
            "expires_at": timestamp(self.expires_at),
            "archived_at": null,
            "cancel_initiated_at": self.cancel_initiated_at.map(timestamp),
            "results_url": ended.then(|| format!("{base_url}/v1/messages/batches/{}/results", self.id)),
        })
    }
}

pub(crate) struct StoredFile {
    pub(crate) id: String,
    pub(crate) filename: String,
    pub(crate) purpose: String,
    pub(crate) created_at: i64,
    pub(crate) content: Vec<u8>,
}

impl StoredFile {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id, "object": "file", "bytes": self.content.len(), "created_at": self.created_at,
            "filename": self.filename, "purpose": self.purpose, "status": "processed",
            "expires_at": null, "status_details": null,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Validating,
    Failed,
    InProgress,
    Finalizing,
    Completed,
    Expired,
    Cancelling,
    Cancelled,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Validating => "validating",
            Status::Failed => "failed",
            Status::InProgress => "in_progress",
            Status::Finalizing => "finalizing",
            Status::Completed => "completed",
            Status::Expired => "expired",
            Status::Cancelling => "cancelling",
            Status::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Failed | Status::Completed | Status::Expired | Status::Cancelled
        )
    }
}

pub(crate) struct OpenAiBatch {
    pub(crate) id: String,
    pub(crate) endpoint: String,
    pub(crate) input_file_id: String,
    pub(crate) status: Status,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) ready_at: DateTime<Utc>,
    pub(crate) in_progress_at: Option<i64>,
    pub(crate) finalizing_at: Option<i64>,
    pub(crate) completed_at: Option<i64>,
    pub(crate) failed_at: Option<i64>,
    pub(crate) expired_at: Option<i64>,
    pub(crate) cancelling_at: Option<i64>,
    pub(crate) cancelled_at: Option<i64>,
    pub(crate) metadata: Value,
    /// Parsed input lines: (custom_id, body).
    pub(crate) requests: Vec<(String, Value)>,
    /// Written at finalizing, shown only once the batch is terminal.
    pub(crate) pending_files: (Option<String>, Option<String>),
    pub(crate) output_file_id: Option<String>,
    pub(crate) error_file_id: Option<String>,
    pub(crate) total: u64,
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    pub(crate) errors: Vec<Value>,
    pub(crate) ends_expired: bool,
    pub(crate) not_found_remaining: u32,
}

impl OpenAiBatch {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": null,
            "errors": if self.errors.is_empty() { Value::Null } else { json!({"object": "list", "data": self.errors}) },
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status.as_str(),
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at.timestamp(),
            "in_progress_at": self.in_progress_at,
            "expires_at": (self.created_at + chrono::Duration::hours(24)).timestamp(),
            "finalizing_at": self.finalizing_at,
            "completed_at": self.completed_at,
            "failed_at": self.failed_at,
            "expired_at": self.expired_at,
            "cancelling_at": self.cancelling_at,
            "cancelled_at": self.cancelled_at,
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
        })
    }
}
