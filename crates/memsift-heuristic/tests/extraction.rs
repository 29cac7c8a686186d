//! Behaviour of the heuristic lane, table-driven: user sentences in, expected memories out.

use chrono::{DateTime, TimeZone, Utc};
use memsift_core::contract::{ExtractedItem, Turn};
use memsift_core::status::{Role, Temporal};
use memsift_heuristic::{extract, extract_json};

/// Wednesday 6 May 2026, noon UTC: every relative date below resolves against this.
fn said_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 6, 12, 0, 0).unwrap()
}

fn turn(label: &str, role: Role, speaker: Option<&str>, content: &str) -> Turn {
    Turn {
        label: label.into(),
        role,
        speaker: speaker.map(Into::into),
        content: content.into(),
        at: said_at(),
    }
}

fn user(content: &str) -> Turn {
    turn("t1", Role::User, None, content)
}

/// One expected memory: its text, whether it is sensitive, and how long it holds.
type Expected = (&'static str, bool, Temporal);

/// Extracts one user turn and compares texts and flags, in order.
fn check(speaker: Option<&str>, content: &str, expected: &[Expected]) {
    let items = extract(&[turn("t1", Role::User, speaker, content)]);
    let got: Vec<(String, bool, Temporal)> = items
        .iter()
        .map(|i| (i.text.clone(), i.sensitive, i.temporal))
        .collect();
    let want: Vec<(String, bool, Temporal)> = expected.iter().map(|(t, s, k)| ((*t).to_owned(), *s, *k)).collect();
    assert_eq!(got, want, "input: {content:?}");
    for item in &items {
        assert_eq!(item.evidence_turns, vec!["t1".to_owned()], "input: {content:?}");
        assert!(item.text.chars().count() >= 10, "too short: {:?}", item.text);
        assert!((0.0..=1.0).contains(&item.confidence));
    }
}

use Temporal::{Durable, OneOff, Recurring, Unknown};

#[test]
fn identity_facts() {
    check(
        None,
        "My name is Caroline Smith.",
        &[("The user's name is Caroline Smith.", true, Durable)],
    );
    check(None, "Hi! I'm Priya.", &[("The user's name is Priya.", true, Durable)]);
    check(
        None,
        "Just call me Bo",
        &[("The user wants to be called Bo.", true, Durable)],
    );
    check(
        None,
        "I'm 34 years old.",
        &[("The user is 34 years old.", true, Durable)],
    );
    check(
        None,
        "My pronouns are they/them.",
        &[("The user uses the pronouns they/them.", true, Durable)],
    );
    check(None, "I'm Canadian.", &[("The user is Canadian.", true, Durable)]);
    check(
        None,
        "I speak English, French and Hindi.",
        &[("The user speaks English, French and Hindi.", false, Durable)],
    );
    check(
        Some("Joanna"),
        "I'm fluent in Portuguese.",
        &[("Joanna is fluent in Portuguese.", false, Durable)],
    );
}

#[test]
fn residence_and_origin() {
    check(
        Some("Caroline"),
        "I live in Boston.",
        &[("Caroline lives in Boston.", true, Durable)],
    );
    check(
        None,
        "Oh, btw, I'm based in São Paulo these days",
        // The time word stays: it tells a later reader (and the relationship judge) that this
        // replaced an earlier home.
        &[("The user lives in São Paulo these days.", true, Durable)],
    );
    check(
        None,
        "I grew up in New York City",
        &[("The user grew up in New York City.", true, Durable)],
    );
    check(
        None,
        "I'm originally from the Netherlands.",
        &[("The user is from the Netherlands.", true, Durable)],
    );
    check(
        None,
        "I'm moving to Berlin.",
        &[("The user is moving to Berlin.", true, Unknown)],
    );
    check(
        None,
        "I just moved to Denver!",
        &[("The user moved to Denver.", true, Durable)],
    );
}

#[test]
fn work_and_study() {
    check(
        None,
        "I work at Google.",
        &[("The user works at Google.", true, Durable)],
    );
    check(
        Some("Sam"),
        "I work as a nurse at St. Mary's Hospital",
        &[("Sam works as a nurse at St. Mary's Hospital.", true, Durable)],
    );
    check(
        None,
        "I'm a software engineer.",
        &[("The user is a software engineer.", true, Durable)],
    );
    check(
        None,
        "I'm an architect at Foster and Partners.",
        &[("The user is an architect at Foster and Partners.", true, Durable)],
    );
    check(None, "I'm retired.", &[("The user is retired.", true, Durable)]);
    check(
        None,
        "I'm studying marine biology at Stanford University.",
        &[(
            "The user is studying marine biology at Stanford University.",
            true,
            Durable,
        )],
    );
    check(
        None,
        "I work for a small startup",
        &[("The user works for a small startup.", true, Durable)],
    );
}

#[test]
fn family_partners_and_pets() {
    check(
        Some("Melanie"),
        "My husband's name is Tom.",
        &[("Melanie has a husband named Tom.", true, Durable)],
    );
    check(
        None,
        "I went hiking with my sister Anna.",
        &[("The user has a sister named Anna.", true, Durable)],
    );
    check(None, "I have two kids.", &[("The user has two kids.", true, Durable)]);
    check(
        None,
        "I'm married to Alex",
        &[("The user is married to Alex.", true, Durable)],
    );
    check(
        None,
        "I got engaged last week!",
        &[("The user got engaged.", true, Durable)],
    );
    check(
        None,
        "I have a dog named Rex.",
        &[("The user has a dog named Rex.", false, Durable)],
    );
    check(
        None,
        "My cat Luna keeps me up at night.",
        &[("The user has a cat named Luna.", false, Durable)],
    );
    check(
        None,
        "I have three cats",
        &[("The user has three cats.", false, Durable)],
    );
    check(
        None,
        "I'm a single mom of two",
        &[("The user is a single mom of two.", true, Durable)],
    );
}

#[test]
fn preferences_and_dislikes() {
    check(
        None,
        "I love hiking, it clears my head.",
        &[("The user loves hiking.", false, Durable)],
    );
    check(
        Some("Nate"),
        "I really enjoy cooking Thai food for my friends",
        &[(
            "Nate really enjoys cooking Thai food for their friends.",
            false,
            Durable,
        )],
    );
    check(
        None,
        "I hate cilantro.",
        &[("The user hates cilantro.", false, Durable)],
    );
    check(
        None,
        "I don't like horror movies",
        &[("The user doesn't like horror movies.", false, Durable)],
    );
    check(
        None,
        "I can't stand loud music.",
        &[("The user can't stand loud music.", false, Durable)],
    );
    check(
        None,
        "My favorite band is Radiohead.",
        &[("The user's favorite band is Radiohead.", false, Durable)],
    );
    check(
        None,
        "I'm a huge fan of the Beatles.",
        &[("The user is a fan of the Beatles.", false, Durable)],
    );
    check(
        None,
        "I use Neovim for Rust.",
        &[("The user uses Neovim for Rust.", false, Durable)],
    );
    check(
        None,
        "I use Python 3.12.",
        &[("The user uses Python 3.12.", false, Durable)],
    );
    check(
        None,
        "I play the guitar.",
        &[("The user plays the guitar.", false, Durable)],
    );
    check(
        None,
        "I'm really into bouldering",
        &[("The user is into bouldering.", false, Durable)],
    );
}

#[test]
fn health_constraints() {
    check(
        None,
        "I'm severely allergic to peanuts.",
        &[("The user is allergic to peanuts.", true, Durable)],
    );
    check(
        None,
        "I have a shellfish allergy.",
        &[("The user has a shellfish allergy.", true, Durable)],
    );
    check(None, "I'm vegetarian.", &[("The user is vegetarian.", true, Durable)]);
    check(
        None,
        "I don't eat pork.",
        &[("The user doesn't eat pork.", true, Durable)],
    );
    check(
        None,
        "I was diagnosed with ADHD last year.",
        &[("The user was diagnosed with ADHD last year.", true, Durable)],
    );
    check(None, "I have asthma.", &[("The user has asthma.", true, Durable)]);
    check(None, "I'm on insulin.", &[("The user takes insulin.", true, Durable)]);
}

#[test]
fn rules_for_the_assistant() {
    check(
        None,
        "Please don't use emojis.",
        &[("The user does not want the assistant to use emojis.", false, Durable)],
    );
    check(
        None,
        "Never call me Bob.",
        &[("The user wants the assistant to never call them Bob.", false, Durable)],
    );
    check(
        None,
        "Always answer in British English.",
        &[(
            "The user wants the assistant to always answer in British English.",
            false,
            Durable,
        )],
    );
    check(
        None,
        "Please stop apologizing.",
        &[("The user wants the assistant to stop apologizing.", false, Durable)],
    );
    check(
        Some("Ada"),
        "From now on, reply in French.",
        &[(
            "Ada wants the assistant to reply in French from now on.",
            false,
            Durable,
        )],
    );
}

#[test]
fn plans_resolve_relative_and_explicit_dates() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "I'm flying to Tokyo tomorrow.",
            "The user is flying to Tokyo on 2026-05-07.",
            "2026-05-07",
        ),
        (
            "I have a dentist appointment next Monday.",
            "The user has a dentist appointment on 2026-05-11.",
            "2026-05-11",
        ),
        (
            "I'm going to visit my mom on Friday.",
            "The user plans to visit their mom on 2026-05-08.",
            "2026-05-08",
        ),
        (
            "My surgery is on May 20.",
            "The user's surgery is on 2026-05-20.",
            "2026-05-20",
        ),
        (
            "I'm moving to Lisbon next week.",
            "The user is moving to Lisbon on 2026-05-11.",
            "2026-05-11",
        ),
        (
            "I'll be in Paris on 3 June 2026.",
            "The user plans to be in Paris on 2026-06-03.",
            "2026-06-03",
        ),
        (
            "I have an interview on 2026-05-13.",
            "The user has an interview on 2026-05-13.",
            "2026-05-13",
        ),
    ];
    for (input, text, day) in cases {
        let items = extract(&[user(input)]);
        assert_eq!(items.len(), 1, "{input}: {items:?}");
        assert_eq!(items[0].text, *text, "{input}");
        assert_eq!(items[0].happens_at.as_deref(), Some(*day), "{input}");
        assert_eq!(items[0].temporal, OneOff, "{input}");
        assert!(items[0].sensitive, "schedules are private: {input}");
    }
    let birthday = extract(&[user("My birthday is May 3.")]);
    assert_eq!(birthday[0].text, "The user's birthday is on May 3.");
    assert_eq!(birthday[0].happens_at.as_deref(), Some("2027-05-03"));
    assert_eq!(birthday[0].temporal, Recurring);
}

#[test]
fn routines_are_recurring() {
    check(
        None,
        "I go to yoga every Monday.",
        &[("The user goes to yoga every Monday.", true, Recurring)],
    );
    check(
        None,
        "Every morning, I walk my dog.",
        &[("The user walks their dog every morning.", true, Recurring)],
    );
}

#[test]
fn small_talk_moods_commands_questions_and_hypotheticals_give_nothing() {
    let nothing = [
        "Hi there!",
        "Hello, how are you?",
        "Thanks so much, that was really helpful!",
        "Thank you!",
        "I'm so tired today.",
        "I'm sure.",
        "I am going to check.",
        "Set an alarm for 7.",
        "Convert this file to pdf.",
        "Don't worry about it.",
        "Never give up on your dreams!",
        "What's the weather like in Boston?",
        "Do you like jazz?",
        "Where do I live again?",
        "If I were rich, I would live in Monaco.",
        "I might move to Berlin.",
        "Maybe I will learn Spanish.",
        "I think I'm allergic to cats.",
        "I love that!",
        "I love it.",
        "I love you guys.",
        "I like your idea.",
        "It's 3pm and sunny.",
        "",
        "   ",
        "🙂🙂🙂",
        "I'm Sorry",
        "I love how you explained it.",
        "I love the energy.",
        "I'd love to.",
        "I love to.",
        "Stop talking about me!",
        "I'll be honest, I'm tired.",
        "I'm starting next week.",
    ];
    for content in nothing {
        let items = extract(&[user(content)]);
        assert!(items.is_empty(), "{content:?} gave {items:?}");
    }
}

/// What the rule table refuses to force into its shapes, the statement rule keeps as said.
#[test]
fn statements_outside_the_rule_table_are_kept_as_said() {
    check(
        None,
        "I used to live in Ohio.",
        &[("The user used to live in Ohio.", true, OneOff)],
    );
    check(
        None,
        "My friend lives in Chicago.",
        &[("The user's friend lives in Chicago.", false, Unknown)],
    );
    check(
        None,
        "I went to a support group yesterday and it was so powerful.",
        &[
            // The fact alone first: the processor keeps the first of two near-duplicates.
            ("The user went to a support group on 5 May 2026.", false, OneOff),
            (
                "The user went to a support group on 5 May 2026 and it was powerful.",
                false,
                OneOff,
            ),
        ],
    );
    check(
        None,
        "I also love a dairy-free chocolate mousse.",
        &[("The user also loves a dairy-free chocolate mousse.", false, Unknown)],
    );
    check(
        None,
        "My girlfriend, Toby and I are going camping.",
        &[(
            "The user's girlfriend, Toby and the user are going camping.",
            true,
            Unknown,
        )],
    );
}

#[test]
fn assistant_tool_and_system_turns_are_never_sources() {
    for role in [Role::Assistant, Role::Tool, Role::System] {
        let items = extract(&[turn("a1", role, Some("Bot"), "I live in Boston and I work at Google.")]);
        assert!(items.is_empty(), "{role:?} gave {items:?}");
    }
}

#[test]
fn several_facts_in_one_turn_become_separate_items_with_their_evidence() {
    let turns = [
        turn(
            "D1:1",
            Role::User,
            Some("Caroline"),
            "I live in Boston and I work at Acme Corp. I love jazz!",
        ),
        turn("D1:2", Role::Assistant, None, "Nice! I love jazz too."),
        turn("D1:3", Role::User, Some("Caroline"), "My dog Max is the best."),
    ];
    let items = extract(&turns);
    let summary: Vec<(&str, &str)> = items
        .iter()
        .map(|i| (i.text.as_str(), i.evidence_turns[0].as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Caroline lives in Boston.", "D1:1"),
            ("Caroline works at Acme Corp.", "D1:1"),
            ("Caroline loves jazz.", "D1:1"),
            ("Caroline has a dog named Max.", "D1:3"),
        ]
    );
}

#[test]
fn entities_carry_their_kinds() {
    let kinds = |content: &str| -> Vec<(String, String)> {
        extract(&[user(content)])
            .iter()
            .flat_map(|i| i.entities.iter().map(|e| (e.name.clone(), e.kind.clone())))
            .collect()
    };
    assert_eq!(kinds("My dog Rex is silly."), vec![("Rex".into(), "pet".into())]);
    assert_eq!(
        kinds("My wife, Sarah, is a doctor."),
        vec![("Sarah".into(), "person".into())]
    );
    assert_eq!(
        kinds("I live in the Netherlands."),
        vec![("Netherlands".into(), "place".into())]
    );
    assert_eq!(
        kinds("I work at OpenAI."),
        vec![("OpenAI".into(), "organization".into())]
    );
    assert_eq!(kinds("I work for a small startup."), Vec::<(String, String)>::new());
}

#[test]
fn privacy_phrases_make_otherwise_public_facts_sensitive() {
    check(
        None,
        "I love cooking for my wife.",
        &[("The user loves cooking for their wife.", true, Durable)],
    );
}

#[test]
fn duplicate_texts_merge_their_evidence() {
    let turns = [
        turn("t1", Role::User, None, "I love jazz."),
        turn("t2", Role::User, None, "I hate cilantro. I love jazz."),
    ];
    let items = extract(&turns);
    let texts: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
    assert_eq!(texts, vec!["The user loves jazz.", "The user hates cilantro."]);
    assert_eq!(items[0].evidence_turns, vec!["t1".to_owned(), "t2".to_owned()]);
}

#[test]
fn output_is_deterministic_and_serialises_as_the_contract() {
    let turns = [
        user(
            "I live in Boston. I have a dog named Rex. I'm flying to Rome on Friday. I love jazz and I hate cilantro.",
        ),
        turn(
            "t2",
            Role::User,
            Some("Ana"),
            "My name is Ana. I'm allergic to shellfish.",
        ),
    ];
    let first = extract_json(&turns);
    for _ in 0..5 {
        assert_eq!(extract_json(&turns), first);
    }
    let parsed: Vec<ExtractedItem> = serde_json::from_str(&first).unwrap();
    assert_eq!(parsed, extract(&turns));
    assert_eq!(parsed.len(), 7, "{first}");
    assert_eq!(extract_json(&[]), "[]");
}
