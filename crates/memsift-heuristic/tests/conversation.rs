//! People talking to each other: each speaker's statements become memories about that speaker,
//! with dates resolved against the turn and the talk between them left out; and, as
//! properties, whatever the names, letters, sizes and days, no memory puts one speaker's words
//! in another's mouth.

use chrono::{DateTime, Datelike, Days, NaiveDate, TimeZone, Utc, Weekday};
use memsift_core::contract::{ExtractedItem, Turn};
use memsift_core::status::{Role, Temporal};
use memsift_heuristic::extract;
use proptest::prelude::*;

/// Monday 8 May 2023, 1:56 pm: the day every turn below is said unless a test says otherwise.
fn monday() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap()
}

fn said(label: &str, speaker: &str, content: &str) -> Turn {
    Turn {
        label: label.to_owned(),
        role: Role::User,
        speaker: Some(speaker.to_owned()),
        content: content.to_owned(),
        at: monday(),
    }
}

fn texts(items: &[ExtractedItem]) -> Vec<(&str, &str)> {
    items
        .iter()
        .map(|item| (item.text.as_str(), item.evidence_turns[0].as_str()))
        .collect()
}

#[test]
fn two_friends_talking_give_each_their_own_memories() {
    let turns = [
        said("D1:1", "Caroline", "Hey Mel! Good to see you! How have you been?"),
        said(
            "D1:2",
            "Melanie",
            "Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
        ),
        said(
            "D1:3",
            "Caroline",
            "I went to a LGBTQ support group yesterday and it was so powerful.",
        ),
        said(
            "D1:4",
            "Melanie",
            "Wow, that's cool, Caroline! What happened that was so awesome?",
        ),
        said(
            "D1:5",
            "Caroline",
            "Gonna continue my edu and check out career options, which is pretty exciting!",
        ),
        said("D1:6", "Melanie", "You'd be a great counselor! I'm so proud of you."),
        said(
            "D1:7",
            "Melanie",
            "Last Saturday my husband Tom and I took the kids to the Grand Canyon.",
        ),
        said(
            "D1:8",
            "Caroline",
            "I still have the necklace you gave me, Mel. Thanks!",
        ),
    ];
    let items = extract(&turns);
    assert_eq!(
        texts(&items),
        vec![
            ("Melanie is swamped with the kids & work.", "D1:2"),
            // The fact without how it felt comes first: the processor keeps the first of two
            // near-duplicates.
            ("Caroline went to a LGBTQ support group on 7 May 2023.", "D1:3"),
            (
                "Caroline went to a LGBTQ support group on 7 May 2023 and it was powerful.",
                "D1:3"
            ),
            (
                "Caroline is going to continue their edu and check out career options.",
                "D1:5"
            ),
            (
                "Caroline is going to continue their edu and check out career options, which is exciting.",
                "D1:5"
            ),
            ("Melanie has a husband named Tom.", "D1:7"),
            (
                "On 6 May 2023, Melanie's husband Tom and Melanie took the kids to the Grand Canyon.",
                "D1:7"
            ),
            ("Caroline has the necklace Melanie gave Caroline.", "D1:8"),
        ]
    );
    let support_group = &items[1];
    assert_eq!(support_group.happens_at.as_deref(), Some("2023-05-07"));
    assert_eq!(support_group.temporal, Temporal::OneOff);
    let canyon = &items[6];
    let entities: Vec<(&str, &str)> = canyon
        .entities
        .iter()
        .map(|entity| (entity.name.as_str(), entity.kind.as_str()))
        .collect();
    assert_eq!(entities, vec![("Tom", "person"), ("Grand Canyon", "place")]);
    assert!(canyon.sensitive, "family outings are private");
}

#[test]
fn a_claimed_photo_is_what_the_speaker_showed_and_chatter_around_it_is_not_kept() {
    let turns = [
        said(
            "D2:1",
            "Melanie",
            "Here's a pic of my kids at the beach! [shares a photo: a photo of two children building a sandcastle]",
        ),
        said(
            "D2:2",
            "Caroline",
            "Aww, so cute! [shares a photo: a photo of a cat on a sofa]",
        ),
    ];
    let items = extract(&turns);
    assert_eq!(
        texts(&items),
        vec![("Melanie shared a photo of their kids at the beach.", "D2:1")],
        "the speaker's words say what the picture is to them"
    );
    assert_eq!(items[0].confidence, 0.6);
}

#[test]
fn the_speakers_own_words_for_a_photo_say_what_it_shows() {
    let turns = [
        said(
            "D2:1",
            "John",
            "These are my lucky basketball shoes. [shares a photo: a photo of a pair of sneakers in a box]",
        ),
        said(
            "D2:2",
            "Maria",
            "Check out these kids I met at the shelter! [shares a photo: a photo of children playing]",
        ),
        said(
            "D2:3",
            "John",
            "Check out this view! [shares a photo: a photo of a mountain]",
        ),
    ];
    assert_eq!(
        texts(&extract(&turns)),
        vec![
            ("John shared a photo of their lucky basketball shoes.", "D2:1"),
            ("Maria shared a photo of these kids Maria met at the shelter.", "D2:2"),
        ],
        "the caption stands in only when the words do not say; a view of nobody's is not kept"
    );
}

/// Only the next sentence joins: a statement with a story attached says too much to be one memory.
#[test]
fn a_sentence_that_carries_on_a_statement_joins_it() {
    let items = extract(&[said(
        "D3:1",
        "Jolene",
        "I started using a bullet journal last week. It's been really helpful for tracking my tasks. It has colourful stickers and a ribbon bookmark. Anyway, how are you?",
    )]);
    assert_eq!(
        texts(&items),
        vec![
            (
                "Jolene started using a bullet journal in the week of 1 May 2023. It has been helpful for tracking Jolene's tasks.",
                "D3:1"
            ),
            (
                "Jolene started using a bullet journal in the week of 1 May 2023.",
                "D3:1"
            )
        ],
        "the statement stays a memory of its own beside the joined one, which comes first: \
         the processor keeps the first of two near-duplicates"
    );
}

#[test]
fn a_caption_stands_in_only_for_a_turn_that_said_nothing_else() {
    let turns = [
        said(
            "D4:1",
            "Nate",
            "I adopted a turtle from the rescue center last week. [shares a photo: a photo of a turtle on a rock]",
        ),
        said(
            "D4:2",
            "Joanna",
            "I made this! [shares a photo: a photo of a cat on a sofa]",
        ),
    ];
    assert_eq!(
        texts(&extract(&turns)),
        vec![
            (
                "Nate adopted a turtle from the rescue center in the week of 1 May 2023.",
                "D4:1"
            ),
            ("Joanna shared a photo of a cat on a sofa.", "D4:2"),
        ],
        "the statement says what the turn shared; the caption says it for a turn of no words of its own"
    );
}

#[test]
fn a_long_account_without_i_is_kept_as_what_its_speaker_said() {
    let turns = [
        said(
            "D5:1",
            "Deborah",
            "Hey Jolene! The retreat near the lake was so peaceful and the sunrise lit up the whole sky with bright colors.",
        ),
        said(
            "D5:2",
            "Jolene",
            "That sounds like an amazing trip with lots of beautiful views!",
        ),
        said(
            "D5:3",
            "Deborah",
            "Yoga is such a great way to relax and find peace in a busy life.",
        ),
    ];
    assert_eq!(
        texts(&extract(&turns)),
        vec![(
            "Deborah said the retreat near the lake was peaceful and the sunrise lit up the whole sky with bright colors.",
            "D5:1"
        )],
        "a reaction to the listener and a verdict on life in general are not news"
    );
}

#[test]
fn a_user_talking_to_an_assistant_is_read_the_same_way() {
    let turns = [
        Turn {
            label: "t1".to_owned(),
            role: Role::User,
            speaker: None,
            content: "I finally finished my first marathon on Sunday! My knees hurt though.".to_owned(),
            at: monday(),
        },
        Turn {
            label: "t2".to_owned(),
            role: Role::Assistant,
            speaker: Some("Assistant".to_owned()),
            content: "Congratulations! I ran my first marathon in Boston last year.".to_owned(),
            at: monday(),
        },
    ];
    let items = extract(&turns);
    assert_eq!(
        texts(&items),
        vec![
            ("The user finished their first marathon on 7 May 2023.", "t1"),
            ("The user's knees hurt.", "t1")
        ],
        "two specific words (knees, hurt) stand alone; the assistant's marathon is not the user's"
    );
}

/// The properties below build conversations from these pieces.
const STATEMENTS: &[&str] = &[
    "I went to the museum yesterday with my sister.",
    "My dog Rex loves the park.",
    "We adopted a kitten last month!",
    "I'm learning to play the violin.",
    "I still have the book you gave me.",
    "You did great, I'm so proud of you!",
    "That's awesome!",
    "I love it.",
    "Thanks! I painted my kitchen last Saturday.",
    "Been working on my garden a lot.",
    "These are my lucky running shoes! [shares a photo: a photo of a pair of sneakers]",
    "I made lentil soup with ginger, maybe you would like it!",
    "I got a puppy two weeks ago!",
    "I ran a charity race yesterday and it was so hard.",
    "The retreat near the lake was so peaceful and the sunrise lit up the whole sky with colors.",
    "I can't wait to see the new gallery, I still love my fam!",
    "I adopted a turtle last week. [shares a photo: a photo of a turtle on a rock]",
];

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Z][a-z]{1,10}",
        "\\PC{0,12}",
        Just(String::new()),
        Just("   ".to_owned()),
        Just("Zoë O'Neil-Smith".to_owned()),
        Just("李小龍".to_owned()),
        Just("Ана".to_owned()),
        Just("I".to_owned()),
        Just("My".to_owned()),
        // Names that read like the words the tidying removes or writes out.
        Just("Still".to_owned()),
        Just("Fam".to_owned()),
    ]
}

/// The name a memory about `speaker` carries, lower-cased: their words joined by single
/// spaces, or the user.
fn shown_name(speaker: &str) -> String {
    let words: Vec<&str> = speaker.split_whitespace().collect();
    if words.is_empty() {
        "the user".to_owned()
    } else {
        words.join(" ").to_lowercase()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every memory cites only turns of one speaker, never an assistant's, and names that speaker.
    #[test]
    fn memories_stay_with_the_speaker_who_said_them(
        first in name(),
        second in name(),
        picks in prop::collection::vec((0..STATEMENTS.len(), any::<bool>(), 0..3u8), 1..12),
    ) {
        let turns: Vec<Turn> = picks
            .iter()
            .enumerate()
            .map(|(index, (statement, by_first, role))| Turn {
                label: format!("D1:{index}"),
                role: if *role == 0 { Role::Assistant } else { Role::User },
                speaker: Some(if *by_first { first.clone() } else { second.clone() }),
                content: STATEMENTS[*statement].to_owned(),
                at: monday(),
            })
            .collect();
        for item in extract(&turns) {
            let cited: Vec<&Turn> = turns.iter().filter(|turn| item.evidence_turns.contains(&turn.label)).collect();
            prop_assert_eq!(cited.len(), item.evidence_turns.len(), "{:?} cites unknown turns", item.text);
            prop_assert!(cited.iter().all(|turn| turn.role == Role::User), "{:?} cites an assistant", item.text);
            let speakers: Vec<String> = cited.iter().map(|turn| shown_name(turn.speaker.as_deref().unwrap_or(""))).collect();
            prop_assert!(speakers.windows(2).all(|pair| pair[0] == pair[1]), "{:?} mixes speakers", item.text);
            prop_assert!(
                item.text.to_lowercase().contains(&speakers[0]),
                "{:?} does not name its speaker {:?}", item.text, speakers[0]
            );
        }
    }

    /// A first-person statement of one speaker never comes out as the other's.
    #[test]
    fn the_other_speaker_is_never_the_subject_of_a_first_person_statement(
        first in "[A-Z][a-z]{2,8}",
        second in "[A-Z][a-z]{2,8}",
        statement in 0..STATEMENTS.len(),
    ) {
        prop_assume!(!first.starts_with(&second) && !second.starts_with(&first));
        let turns = [said("D1:1", &first, STATEMENTS[statement]), said("D1:2", &second, "Cool!")];
        for item in extract(&turns) {
            prop_assert!(!item.text.starts_with(&second), "{:?} from {}'s turn", item.text, first);
            prop_assert_eq!(&item.evidence_turns, &vec!["D1:1".to_owned()]);
        }
    }

    /// Any language's letters, empty and long turns: no panic, and the output keeps its shape.
    #[test]
    fn any_text_extracts_into_well_formed_items(content in "\\PC{0,400}", speaker in name()) {
        let turns = [said("D1:1", &speaker, &content)];
        let items = extract(&turns);
        for item in &items {
            prop_assert!(item.text.chars().count() >= 10);
            prop_assert!((0.0..=1.0).contains(&item.confidence));
            prop_assert_eq!(&item.evidence_turns, &vec!["D1:1".to_owned()]);
            if let Some(day) = &item.happens_at {
                prop_assert!(NaiveDate::parse_from_str(day, "%Y-%m-%d").is_ok());
            }
        }
        prop_assert_eq!(extract(&turns), items, "deterministic");
    }

    /// A long sentence of any letters without "I" is at most what its own speaker said: it names
    /// them, cites their turn only, and never opens with the other speaker.
    #[test]
    fn an_account_without_i_stays_with_its_speaker(
        first in name(),
        second in "[A-Z][a-z]{2,8}",
        words in prop::collection::vec("[\\p{L}]{2,10}", 6..14),
        ending in prop::sample::select(vec![".", "!", "", " :)"]),
    ) {
        prop_assume!(!first.trim().is_empty() && !second.starts_with(first.trim()) && !first.trim().starts_with(&second));
        let sentence = format!("The {}{ending}", words.join(" "));
        let turns = [said("D1:1", &first, &sentence), said("D1:2", &second, "Nice!")];
        for item in extract(&turns) {
            prop_assert_eq!(&item.evidence_turns, &vec!["D1:1".to_owned()]);
            prop_assert!(item.text.to_lowercase().contains(&shown_name(&first)), "{:?}", item.text);
            prop_assert!(!item.text.starts_with(&second), "{:?}", item.text);
            prop_assert!((0.0..=1.0).contains(&item.confidence));
        }
    }

    /// Relative days resolve across month and year ends, leap days included.
    #[test]
    fn relative_days_resolve_at_month_and_year_ends(
        year in 1990i32..2090,
        month in 1u32..=12,
        end_of_month in any::<bool>(),
        day_pick in 1u32..=28,
    ) {
        let first_of_next = if month == 12 {
            NaiveDate::from_ymd_opt(year + 1, 1, 1).unwrap()
        } else {
            NaiveDate::from_ymd_opt(year, month + 1, 1).unwrap()
        };
        let day = if end_of_month { first_of_next.pred_opt().unwrap() } else { NaiveDate::from_ymd_opt(year, month, day_pick).unwrap() };
        let at = day.and_hms_opt(12, 0, 0).unwrap().and_utc();
        let happens = |content: &str| {
            let turn = Turn { label: "t1".to_owned(), role: Role::User, speaker: Some("Ana".to_owned()), content: content.to_owned(), at };
            extract(&[turn]).into_iter().find_map(|item| item.happens_at)
                .map(|iso| NaiveDate::parse_from_str(&iso, "%Y-%m-%d").unwrap())
        };
        prop_assert_eq!(happens("I visited the botanical garden yesterday."), day.pred_opt());
        prop_assert_eq!(happens("I visited the botanical garden today."), Some(day));
        let saturday = happens("I visited the botanical garden last Saturday.").unwrap();
        prop_assert_eq!(saturday.weekday(), Weekday::Sat);
        prop_assert!(saturday < day && day - saturday <= chrono::Duration::days(7));
        let month_start = happens("I'm starting a pottery class next month.").unwrap();
        prop_assert_eq!(month_start, first_of_next);
        prop_assert_eq!(happens("I visited the botanical garden two weeks ago."), day.checked_sub_days(Days::new(14)).map(|d| d - chrono::Duration::days(i64::from(d.weekday().num_days_from_monday()))));
    }
}

#[test]
fn huge_and_empty_turns_extract() {
    let mebibyte = "I went to the museum with my sister yesterday. ".repeat((1 << 20) / 48);
    let huge = extract(&[said("D1:1", "Ana", &mebibyte)]);
    assert_eq!(huge.len(), 1, "one memory, every repeat cited by the same turn");
    let one_sentence = format!("I love {}", "very ".repeat(200_000));
    assert!(extract(&[said("D1:1", "Ana", &one_sentence)]).is_empty());
    assert!(extract(&[said("D1:1", "Ana", "")]).is_empty());
    assert!(extract(&[]).is_empty());
    let accounts =
        "The old harbour market sells fresh fish, warm bread and painted ceramic bowls. ".repeat((1 << 20) / 80);
    let said_once = extract(&[said("D1:1", "Ana", &accounts)]);
    assert_eq!(
        said_once.iter().map(|item| item.text.as_str()).collect::<Vec<_>>(),
        vec!["Ana said the old harbour market sells fresh fish, warm bread and painted ceramic bowls."],
        "a repeated account is one memory"
    );
}
