"""The retention policy and the text checks under it, on their own (no model, no database)."""

from __future__ import annotations

import pytest

from memory_agent.writers.extractive import facts, retention, statements, values
from memory_agent.writers.extractive.retention import NEW_MEMORY_ID, Candidate, Step
from memory_agent.writers.extractive.words import text


@pytest.mark.parametrize(
    "sentence",
    [
        "I'm allergic to peanuts.",
        "My daughter Maya starts school in September.",
        "rent 1650.",
        "we're in zone 6b, no idea where to start",
        "one thing you should know, I have dyslexia so reading takes me forever.",
        "now I've got five raised beds total.",
        "Please remember my locker code is 4417.",
        "I love jazz and I play the saxophone.",
        "I like my coffee black with no sugar.",
    ],
)
def test_a_statement_about_the_user_is_worth_keeping(sentence):
    assert statements.statement_score(sentence, "user") > 0


@pytest.mark.parametrize(
    "sentence",
    [
        "Hi! How are you today?",
        "What's the capital of France?",
        "its like 95 degrees out, what can I make for dinner?",
        "I need 2 eggs for a cake.",
        "Thanks, bye!",
        "No, I can't.",
        "I love that!",
        "Thanks, I may ask more later.",
    ],
)
def test_small_talk_and_questions_about_the_world_are_not(sentence):
    assert statements.statement_score(sentence, "user") == 0


def test_the_assistant_counts_only_when_it_confirms_something_done():
    confirmed = [("user", "Can you find a table Friday?"),
                 ("assistant", "Done! I booked Osteria Lucca. Your table is at 7:30pm.")]
    found = statements.key_statements(confirmed)
    assert [s.speaker for s in found] == ["assistant", "assistant"]
    advice = [("assistant", "Boil the eggs for 10 minutes at 100 degrees in Paris.")]
    assert statements.key_statements(advice) == []


def test_a_grounded_sentence_says_only_what_the_source_says():
    source = facts.vocabulary("My friend Alice lives in Oslo and works at 3 hospitals.")
    assert facts.is_grounded("The user's friend Alice lives in Oslo.", source)
    assert not facts.is_grounded("The user's friend Alice lives in Paris.", source)
    assert not facts.is_grounded("The user is 25 years old.", source)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("My rent is 1650 a month.", "The landlord raised the rent. It's 1900 now."),
        ("I aim for 1800 calories a day.", "Doctor wants me at 1600 calories a day now."),
        ("I put 25% of every invoice aside.", "Bumping it to 30% of each invoice starting now."),
        ("Mrs Okafor is our babysitter.", "Our old sitter moved away, the new babysitter is Dana."),
        ("I'm plot 14 at the community garden.", "They moved me: I'm plot 31 now."),
        ("I was thinking around $200 a day.", "We're bumping the budget to $275 a day now."),
        # A full name is one name: its surname says nothing of whose it is.
        ("I'll chat, and Marcus Chen will run the system design round.",
         "Update: Aisha Okafor now runs the system design interviews."),
    ],
)
def test_a_newer_value_supersedes_the_old_one(older, newer):
    assert retention.stale_sentences(older, newer) == [older]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Any good way to split chores between 2 kids?", "I booked the party room for 12 kids."),
        ("I always get hungry around 4pm.", "Delivery is on Thursday between 6 and 8pm."),
        ("Dana is my manager and her birthday is May 3.", "Dana moved to Berlin."),
        ("I work as a freelance designer.", "The landlord raised the rent. It's 1900 now."),
        ("Our vet Dr. Okafor only works Tuesdays.", "The vet switched her to Hill's wet food."),
        ("I adopted a cat named Mochi, she's 11.", "My neighbor got a puppy, my cat is OBSESSED."),
        ("My rent is $1650 a month.", "I switched to a Mintwave phone plan at $25 a month."),
        ("My daughter Emma is 7 years old.", "My son Leo is now 10 years old."),
        ("I live in Boston.", "My sister now lives in Denver."),
        ("I work at Acme as an engineer.", "My wife started a new job at Globex."),
        ("I take 20 mg of lisinopril daily.", "The dog now takes 5 mg of Apoquel daily."),
        ("Dentist appointment on May 3 at 10am.", "I may cut sugar; goal is 1800 calories now."),
        # "moved" names no topic: an appointment moved says nothing of the user's address.
        ("The user lives at 42 Elm Street.", "The dentist appointment moved to the 14th."),
        # Names with a comma between them are two names, each someone's.
        ("The user's family dentist is Ana, Bruno is the family physio.",
         "The user's family physio is now Chloe."),
        # A full name is one name, but a run of values holds more than one.
        ("The team lead for Atlas is Marcus Chen.",
         "The team lead for Hermes is now Aisha Okafor."),
        # A duration is no time of day.
        ("The user's yoga class is on Tuesdays at 18:00.",
         "The yoga class on Tuesdays now lasts 2h."),
        # Dutch "Ik" and "van" are function words, not a name and a key both share.
        ('The assistant confirmed: "Komt goed: 1) Ik zet een herinnering voor de APK van de '
         'Iveco rond de 15e van volgende maand."',
         'The assistant confirmed: "Ik heb bij Frigo Lease in Barendrecht een koelbakwagen met '
         'laadklep gehuurd van maandag 5 mei tot en met zondag 18 mei."'),
        # Two things moved share no home: "moved" announces the change, it names no topic.
        ("The aliquots were moved to the new freezer in room 2.14, shelf 5.",
         "The committee meeting has been moved to Wednesday 23 April at 10:00."),
    ],
)
def test_a_different_fact_does_not(older, newer):
    assert retention.stale_sentences(older, newer) == []


def memories(*contents: str) -> list[Candidate]:
    """Candidates oldest first; the last is the new one."""
    found = [Candidate(n + 1, c) for n, c in enumerate(contents[:-1])]
    return [*found, Candidate(NEW_MEMORY_ID, contents[-1])]


FACTS = [f"The user's friend {name} lives in {city}." for name, city in
         zip("Alice Bruno Chloe Dmitri".split(), "Oslo Porto Quito Riga".split(), strict=True)]


def test_a_memory_without_a_fact_goes_first():
    step = retention.choose(memories(FACTS[0], "The user said hello.", FACTS[1]), max_chars=400)
    assert (step.action, step.target) == ("delete", 2)


def test_a_repeated_fact_goes_before_a_merge():
    step = retention.choose(memories(FACTS[0], FACTS[1], FACTS[0]), max_chars=400)
    assert (step.action, step.target) == ("delete", 1)


def test_when_every_memory_holds_a_fact_two_are_merged_without_loss():
    step = retention.choose(memories(*FACTS), max_chars=400)
    assert step.action == "edit" and step.folded is not None
    assert step.new_content is not None
    assert all(name in step.new_content for name in _names_of(step, FACTS))


def _names_of(step: Step, texts: list[str]) -> list[str]:
    ids = {step.target, step.folded}
    by_id = {c.id: c.content for c in memories(*texts)}
    return [by_id[i].split()[3] for i in ids]


def test_when_nothing_fits_together_the_poorest_oldest_goes():
    step = retention.choose(memories(*FACTS), max_chars=50)
    assert (step.action, step.target) == ("delete", 1)


def test_a_model_delete_of_a_unique_fact_is_overruled():
    candidates = memories(*FACTS)
    step, why = retention.review(candidates, Step("delete", 2, "old"), max_chars=400)
    assert step.action == "edit" and why is not None and why.startswith("overruled")


def test_a_model_delete_of_a_fact_free_memory_stands():
    candidates = memories(FACTS[0], "The user said hello.", FACTS[1])
    proposed = Step("delete", 2, "small talk")
    assert retention.review(candidates, proposed, max_chars=400) == (proposed, None)


def test_an_edit_keeping_both_facts_stands_and_one_dropping_a_fact_does_not():
    candidates = memories(FACTS[0], FACTS[1])
    good = Step("edit", 1, "merge", f"{FACTS[0]} {FACTS[1]}", NEW_MEMORY_ID)
    assert retention.review(candidates, good, max_chars=400) == (good, None)
    lossy = Step("edit", 1, "merge", FACTS[1], NEW_MEMORY_ID)
    step, why = retention.review(candidates, lossy, max_chars=400)
    assert step != lossy and "drops" in (why or "")


def test_refresh_retires_what_the_new_memory_updates():
    candidates = memories(
        'The user said: "My rent is 1650 a month." The user said: "I work as a nurse."',
        FACTS[0],
        'The user said: "The landlord raised the rent. It is 1900 a month now."',
    )
    [step] = retention.refresh(candidates)
    assert (step.action, step.target) == ("edit", 1)
    assert step.new_content == 'The user said: "I work as a nurse."'


def test_the_person_every_memory_speaks_of_ties_nothing():
    """A school app's memories all speak of one child: a new van, announced as a change with
    its time, retires the old van and nothing else of the child's (found on stories written
    apart from the code, where it retired four memories)."""
    newer = "O transporte escolar do Heitor agora é a van da dona Cida, que passa às 6h55."
    for older in [
        "O Heitor faz judô às terças e quintas, às 17h30, no clube.",
        "O Heitor tem alergia grave a amendoim e leva uma caneta de adrenalina na mochila.",
        "O Heitor foi inscrito na excursão ao Museu Catavento de 22/05, saída às 7h15.",
        "O judô do Heitor passou para quartas e sextas, no mesmo horário de 17h30.",
    ]:
        assert retention.stale_sentences(older, newer) == [], older
    old_van = "O transporte escolar do Heitor é a van do tio Valdir, que passa às 6h40."
    assert retention.stale_sentences(old_van, newer) == [old_van]
    english = "Max now takes the school bus with driver Ann, it comes at 7:10."
    swimming = "The user's son Max has swimming on Tuesdays at 5pm."
    assert retention.stale_sentences(swimming, english) == []


def test_small_counts_two_texts_share_by_chance_tie_nothing():
    """A booking with "2 adultes" is not updated by a to-do list numbered "1/ 2/ 3/" that
    names the same room word; nor is an initial's full stop the end of a sentence."""
    booking = ("Réservation enregistrée pour M. et Mme Moreau : chambre Tilleul, du 12 au 15 août "
               "(3 nuits), 2 adultes, petit-déjeuner inclus, référence GH-1186.")
    to_do = ('The user said: "bon plein de trucs: 1/ faut que je rachète des draps, ceux de la '
             "chambre glycine sont usés 2/ rappelle moi de payer l'abonnement booking avant le 5 "
             '3/ c jocelyne qui fait le ménage, elle vient le mardi et le vendredi matin."')
    assert len(text.sentences(booking)) == 1
    assert retention.stale_sentences(booking, to_do) == []


def test_a_word_that_only_looks_like_a_day_is_none():
    """"mais" (more, but) is no May: a memory with a date is not retired by a sentence that
    says it."""
    dated = "Le loyer est payé le 5 juin."
    newer = "Le loyer a augmenté mais il est toujours payé par virement."
    assert retention.refresh(memories(dated, newer)) == []
    assert not any(v.kind == "date" for v in values.keyed_values("Ele não come mais amendoim."))
    assert any(v.kind == "date" for v in values.keyed_values("Judô às terças e sextas-feiras."))


def test_a_sentence_may_end_in_a_capital_letter():
    """"vitamina D." ends its sentence; "J. K." and "M." are initials and a title."""
    assert text.sentences("A usuária toma vitamina D. O exame de sangue é dia 14/06.") == (
        "A usuária toma vitamina D.", "O exame de sangue é dia 14/06.",
    )
    assert len(text.sentences("J. K. Rowling signed it. Then we left.")) == 2
    assert len(text.sentences("Plan B. Then we left.")) == 2


def test_two_flights_are_two_records():
    """The flight home is not updated by the outbound flight, in either order, nor by a
    change of the hotel: each names its own reference (found on a family trip planner)."""
    outbound = ("The assistant confirmed: \"Noted: outbound flight EZY 6417, Bristol to "
                "Montpellier, Saturday 12 July, departing 06:50.\"")
    home = ('The user said: "We drive to Toulouse, drop the car at the airport, and the flight '
            'home, EZY 6432, goes at 19:05 on the 19th."')
    retimed = "The outbound flight EZY 6417 on 12 July has been retimed and now departs at 09:35."
    hotel = ("Updated: from 12 to 16 July you're at Mas Cantagrill outside Argelès-sur-Mer, "
             "two-bedroom apartment, booking ref MC-2207.")
    canoe = "The assistant confirmed: \"Your booking number is AQ-3316.\""
    assert retention.stale_sentences(outbound, home) == []
    assert retention.stale_sentences(home, hotel) == []
    assert retention.stale_sentences(canoe, hotel) == []
    steps = retention.refresh(memories(outbound, home, retimed))
    assert [step.target for step in steps] == [1]  # the outbound flight, not the flight home


def test_a_month_is_no_new_value_of_a_weekday():
    """"la roja del domingo" (a past Sunday) is not updated by "a partir de noviembre, los
    domingos en casa ..."."""
    banned = ('The user said: "Mala noticia: a Rubén Cifuentes le han caído dos partidos de '
              'sanción por la roja del domingo en Cuarte."')
    kickoff = ('The user said: "Nos han cambiado el horario: a partir de noviembre, los domingos '
               'en casa arrancamos a las doce y cuarto."')
    assert retention.stale_sentences(banned, kickoff) == []
    assert retention.stale_sentences(
        "The yoga class is on Tuesdays.", "The yoga class moved to Thursdays."
    ) == ["The yoga class is on Tuesdays."]


def test_another_unit_or_another_person_is_another_thing():
    """"prende anche ramipril 5 mg" does not update "Eutirox 75 microgrammi"; a customer
    beside "signora" and "figlia" is not updated by another beside "signor" and "figlio"."""
    eutirox = 'The user said: "la signora Mezzasalma prende Eutirox 75 microgrammi al mattino."'
    ramipril = ('The user said: "la signora Mezzasalma adesso prende anche ramipril 5 mg, una la '
                'sera."')
    assert retention.stale_sentences(eutirox, ramipril) == []
    daughter = 'The user said: "È passata la figlia della signora Mezzasalma con la ricetta."'
    son = ('The assistant confirmed: "Aggiornato: i farmaci del signor Pizzigoni li ritira il '
           'figlio Davide."')
    assert retention.stale_sentences(daughter, son) == []
    assert retention.stale_sentences("I take 20 mg of lisinopril daily.",
                                     "The doctor raised my lisinopril to 40 mg daily now.")


def test_a_memory_of_another_titled_person_updates_nothing():
    """The pickup day of the signor Pizzigoni does not retire the new dose the signora
    Mezzasalma's daughter brought; a new babysitter still retires Mrs Okafor."""
    dose = ('The user said: "È passata la figlia della signora Mezzasalma con la ricetta nuova." '
            'The user said: "L\'endocrinologa ha visto il TSH e ha alzato la dose della tiroide: '
            'da adesso la confezione da 88."')
    pickup = ('The user said: "D\'ora in poi le medicine le ritira il figlio Davide, il venerdì '
              'dopo le 18." The assistant confirmed: "Aggiornato: i farmaci del signor Pizzigoni '
              'li ritira il figlio Davide, il venerdì dopo le 18."')
    assert retention.stale_sentences(dose, pickup) == []
    assert retention.stale_sentences(
        "Mrs Okafor is our babysitter.", "Our old sitter moved away, the new babysitter is Dana."
    ) == ["Mrs Okafor is our babysitter."]


def test_the_same_amount_of_another_thing_in_the_memory_stays():
    """The same amount of another thing (a deposit beside the rent, a loan beside daycare, a
    bag beside the dog) stays when the first is updated."""
    assert retention.stale_sentences(
        "Rent is 1,200 €. The user paid a 1,200 € security deposit in March.",
        "The landlord raised the rent to 1,300 € now.",
    ) == ["Rent is 1,200 €."]
    assert retention.stale_sentences(
        'Daycare costs 600 € a month. The user said: "the car loan is 600 € a month too."',
        "Daycare now costs 650 € a month.",
    ) == ["Daycare costs 600 € a month."]
    assert retention.stale_sentences(
        "Il peso di Brando è 14,5 kg. Il sacco di crocchette pesa 14,5 kg.",
        "Il peso di Brando è 15,2 kg.",
    ) == ["Il peso di Brando è 14,5 kg."]


def test_the_checks_take_only_the_clause_of_an_old_time_from_a_quote_with_other_facts():
    """A time said in words ("kwart over zes") updates the bakery's 05:30; the quote it sits
    in also holds an order no other memory has, which stays."""
    older = ('The user said: "Hij haalt eerst het brood bij Bakkerij Oosterhof in Kampen, dat '
             'staat elke dag om 05:30 klaar, en levert daarna order VR-4471 af in Almere."')
    newer = 'The user said: "Vanaf maandag is het brood in Kampen pas kwart over zes klaar."'
    steps = retention.refresh([Candidate(1, older), Candidate(0, newer)])
    for step in steps:
        assert step.action == "edit" and "VR-4471" in (step.new_content or "")


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("La réunion d'équipe commence à 9:00.",
         "La réunion d'équipe dure maintenant une heure et demie."),
        ("La clase de yoga empieza a las 18:00.", "La clase de yoga ahora dura una y media horas."),
        ("The user's sailboat is 32 ft long.",
         "The user's sailboat insurance is now 40 dollars a month."),
    ],
)
def test_a_duration_or_a_length_is_no_new_time_or_amount(older, newer):
    assert retention.stale_sentences(older, newer) == []


def test_an_abbreviation_before_a_number_is_not_any_short_word():
    older = "The user's yoga class starts at 7 pm. 12 people attend it."
    newer = "The user's yoga class now starts at 8 pm."
    assert [s.strip() for s in text.sentences(older)] == [
        "The user's yoga class starts at 7 pm.", "12 people attend it."
    ]
    assert retention.stale_sentences(older, newer) == ["The user's yoga class starts at 7 pm."]
