//! A test application on a real store with a hand-driven clock.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use memsift::app::App;
use memsift_core::ManualClock;
use memsift_core::config::Config;
use memsift_store::testing::TestDb;

pub struct TestApp {
    pub app: App,
    pub clock: ManualClock,
    db: TestDb,
}

pub fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

impl TestApp {
    pub async fn sqlite() -> TestApp {
        TestApp::on(TestDb::sqlite().await).await
    }

    pub async fn postgres() -> TestApp {
        TestApp::on(TestDb::postgres().await).await
    }

    async fn on(db: TestDb) -> TestApp {
        let clock = ManualClock::new(t0());
        let app = App {
            config: Config::defaults(),
            store: db.store.clone(),
            clock: Arc::new(clock.clone()),
            prompts: memsift_core::prompt::PromptRegistry::built_in(),
            worker_id: "test-worker".to_owned(),
        };
        TestApp { app, clock, db }
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    pub async fn import(&self, name: &str, jsonl: &str) -> anyhow::Result<memsift_store::IngestReport> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        std::fs::write(&path, jsonl)?;
        memsift::cli::import_file(&self.app, &path, memsift::import::ImportFormat::Jsonl).await
    }

    pub async fn finish(self) {
        self.db.finish().await;
    }
}

/// A JSONL line.
pub fn line(user: &str, conversation: &str, minute: i64, role: &str, content: &str, boundary: bool) -> String {
    serde_json::json!({
        "user": user,
        "conversation": conversation,
        "role": role,
        "content": content,
        "timestamp": (t0() + Duration::minutes(minute)).to_rfc3339(),
        "boundary": boundary,
    })
    .to_string()
        + "\n"
}
