"""The memory checks beyond English and personal life: values, what they are the values of,
who stated or confirmed them (no model, no database)."""

from __future__ import annotations

import pytest

from memory_agent.writers.extractive import facts, retention, statements, values
from memory_agent.writers.extractive.words import text, written_forms


@pytest.mark.parametrize(
    ("written", "value"),
    [("1.250,00", "1250"), ("1,250.00", "1250"), ("16,5", "16.5"), ("3.11.9", "3.11.9"),
     ("16:00", "16:00"), ("15.04.", "15.04")],
)
def test_a_number_has_one_form_whatever_the_convention(written, value):
    assert text.number_value(written) == value


@pytest.mark.parametrize(
    ("sentence", "kind", "value"),
    [
        ("The disk alert fires at 80% on the db hosts.", "percent", "80"),
        ("Die Miete beträgt 850 € im Monat.", "money", "850"),
        ("Guests arrive at 7pm.", "time", "19:00"),
        ("Le rendez-vous est à 9h40.", "time", "09:40"),
        ("De toeslag gaat naar elf procent.", "percent", "11"),
        ("El examen es el 12 de marzo.", "date", "12"),
        ("Your order number is FC-20931.", "code", "fc-20931"),
        ("We ship everything with DHL now.", "name", "dhl"),
        # Times said in words, in each covered language that has a form for them.
        ("Vanaf maandag is het brood pas kwart over zes klaar.", "time", "06:15"),
        ("Redden we Almere dan nog voor half acht?", "time", "07:30"),
        ("Los domingos jugamos a las doce y cuarto.", "time", "12:15"),
        ("Wir treffen uns um viertel vor neun.", "time", "08:45"),
        ("Rendez-vous à sept heures et demie.", "time", "07:30"),
        ("Ci vediamo alle sei e mezza.", "time", "06:30"),
        ("The bus comes at quarter past 6.", "time", "06:15"),
        # A number grouped by spaces, and currencies written after an amount.
        ("Paret kan nå bruke opptil 1 200 kr per person.", "money", "1200"),
        ("Wyceniono na 1450 zł.", "money", "1450"),
        ("Bilen har nu gått 19 120 mil.", "number", "19120"),
    ],
)
def test_a_value_knows_its_kind(sentence, kind, value):
    assert (kind, value) in {(v.kind, v.value) for v in values.keyed_values(sentence)}


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The disk usage alert on the database hosts fires at 80%.",
         "The disk usage alert threshold on the database hosts is 85%."),
        ("Tiene una sesión semanal fija los martes a las 18:00.",
         "La sesión semanal pasa a ser los jueves a las 17:30."),
        ("Der Shop verschickt alle Pakete mit DHL.",
         "Ab sofort verschickt der Shop alle Pakete mit GLS."),
        ("Rendez-vous à la préfecture du Rhône le 12 mars à 9h40.",
         "Le rendez-vous à la préfecture est reporté au mercredi 2 avril à 14h15."),
        ("The v2.4 release is planned for May 14.", "The v2.4 release date is May 28."),
        ("Production runs PostgreSQL 14.11.", "Production was upgraded to PostgreSQL 16.3."),
        ("Mi alquiler es de 850 € al mes.", "Ahora el alquiler es de 900 € al mes."),
        ("Pour l'adresse tu mets 14 rue Paul Bert, 69003 Lyon.",
         "Un changement d'adresse doit être déclaré. Je mets à jour votre dossier : 27 avenue "
         "Berthelot, 69007 Lyon."),
        ("I have 2 Labradors.", "I now have 3 Labradors."),
    ],
)
def test_a_new_value_of_the_same_thing_retires_the_old_in_any_language(older, newer):
    assert retention.stale_sentences(older, newer) == [older]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Priya Raman owns the payments service.", "Tomasz Wójcik owns the auth service."),
        ("My friend Bruno lives in Porto.", "My friend Chloe lives in Quito."),
        ("We run Postgres 13 in production.", "We run Redis 7 in production."),
        ("Tiene clase de refuerzo el miércoles 7 de mayo a las 16:00.",
         "El examen final se ha retrasado: ahora es el 21 de mayo."),
        ("Das Lager ist in Leipzig.", "Ab sofort holt GLS die Pakete im Lager ab."),
        ("I live in Boston.", "My sister now lives in Denver."),
        ('Remember code 0001 for locker 1.', 'Remember code 0002 for locker 2.'),
        # A number beside a name counts no such thing: a postcode's city, a university.
        ("Pour l'adresse tu mets 14 rue Paul Bert, 69003 Lyon.",
         "J'ai fait mon master à Lyon 2 et après j'ai eu un changement de statut."),
        # "après" says when, not what: no tie between a degree and a new address.
        ("J'ai fait mon master à Lyon 2 et après j'ai eu un changement de statut.",
         "Après le déménagement, la nouvelle adresse est 27 avenue Berthelot, 69007 Lyon."),
    ],
)
def test_another_thing_with_a_value_does_not(older, newer):
    assert retention.stale_sentences(older, newer) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Mi examen de matemáticas es el 12 de marzo.",
        "Wir verschicken alles mit DHL und die Rückgabefrist beträgt 30 Tage.",
        "J'habite au 14 rue Paul Bert à Lyon.",
        "failover to the eu-west replica takes about 4 minutes",
        "we pinned Python 3.11.9 last week",
        "its the airbook 14 pro",
        # Where something lives and whose it is: paths, files, channels, handles.
        "los runbooks están todos en runbooks/<servicio>/ del repo",
        "l'alerte critique part sur #ops-alertes",
        "der Code liegt unter /srv/shop/app/",
        "the deploy config is deploy/helm/values.yaml",
        "reviews go to @team-payments",
        # A reference of the user's, in a request put as a question.
        "Üye numaram 0457-8812, buraya not edebilir misiniz?",
        "order FC-20931 still isn't here, can you check?",
    ],
)
def test_a_statement_with_a_value_is_worth_keeping_in_any_language(sentence):
    assert statements.statement_score(sentence, "user") > 0


@pytest.mark.parametrize(
    "sentence",
    ["i guess yes/no/maybe", "she/her/hers is fine", "kaffee/tee/wasser bitte",
     "il/elle/iel, comme tu veux", "#summer #vibes", "@home all day lol"],
)
def test_words_joined_by_slashes_or_a_plain_tag_are_no_reference(sentence):
    assert text.references(sentence) == frozenset()
    assert statements.statement_score(sentence, "user") == 0


def test_a_reference_is_checked_like_any_value():
    """A model that writes another channel or path than the conversation's is not grounded,
    and a memory with another path does not carry the statement's."""
    source = text.vocabulary(
        "payments reviews go to @team-payments, config in deploy/helm/payments/values.yaml"
    )
    assert facts.is_grounded("The user's payments reviews go to @team-payments.", source)
    assert not facts.is_grounded("The user's payments reviews go to @team-billing.", source)
    assert facts.is_grounded("The user's setup guide is docs/setup.pdf.",
                             text.vocabulary("the setup guide is docs/Setup.PDF"))
    assert text.references("wait /... what, ok /.") == frozenset()
    statement = "the prod config is deploy/helm/payments/values.yaml"
    assert facts.covers("The prod config is deploy/helm/payments/values.yaml.", statement)
    assert not facts.covers("The prod config is deploy/helm/staging/values.yaml.", statement)


def test_a_reference_the_assistant_issues_is_a_confirmation_in_any_language():
    turns = [("user", "¿Me puedes reservar una clase?"),
             ("assistant", "Listo: el jueves 14 a las 17:00, código TS-2291.")]
    [statement] = statements.key_statements(turns)
    assert statement.speaker == "assistant" and "TS-2291" in statement.text
    advice = [("user", "how long do I roast garlic?"),
              ("assistant", "Roast it at 200 degrees for 40 minutes, until mid-70s inside.")]
    assert statements.key_statements(advice) == []


def test_a_number_joined_to_what_it_measures_is_no_reference():
    """General advice says "180-day" and "30-minute": that confirms nothing done. Any code
    of letters and digits still does, in any language: "SMK-114", "KQ7XTZ", "Booking-7731",
    "123-ABC"."""
    advice = [("user", "Do we need a visa for Europe?"),
              ("assistant", "US passport holders can visit the Schengen area visa-free for up "
                            "to 90 days within any 180-day period, with a 30-minute check.")]
    assert statements.key_statements(advice) == []
    for reference in ("SMK-114", "KQ7XTZ", "AB12", "Booking-7731", "123-ABC", "EZY 6417"):
        tasting = [("user", "Kan vi komme på smaksprøving i mars?"),
                   ("assistant", f"Smaksprøvingen er torsdag 6. mars kl. 18:00. Referansen er "
                                 f"{reference}.")]
        assert any(reference in s.text for s in statements.key_statements(tasting)), reference


def test_what_the_assistant_did_in_portuguese_is_a_confirmation():
    """"Marquei!", "Inscrevi", "Comprovante nº": the assistant did something to remember."""
    turns = [("user", "Consegue marcar com alguém do convênio perto da escola?"),
             ("assistant", "Marquei! Avaliação com a Dra. Patrícia Lemos na segunda, 9/06, às "
                           "14h20. Leve a carteirinha do convênio.")]
    assert any("14h20" in s.text for s in statements.key_statements(turns))


def test_a_paraphrase_that_keeps_the_values_is_grounded():
    source = text.vocabulary("doc says she wants me to drop to 1600 calories a day now")
    assert facts.is_grounded("The doctor lowered the user's daily calorie target to 1600.", source)
    assert not facts.is_grounded("The doctor lowered the calorie target to 1500.", source)
    assert not facts.is_grounded("The user's dentist is called Okafor.", source)


def test_memory_sentences_in_another_language_are_checked_by_their_values():
    source = text.vocabulary("El examen de mates es el 12 de marzo, en el IES Severo Ochoa.")
    assert facts.is_grounded("El examen de mates es el 12 de marzo, en el Severo Ochoa.", source)
    assert not facts.is_grounded("El examen de mates es el 19 de marzo.", source)
    assert not facts.is_grounded("El examen de Matemáticas es el 12 de marzo.", source)


# -- the rules added for values whose words are elsewhere, and for records -------------------


def test_a_value_whose_subject_is_the_sentence_before_keeps_it():
    """"its 1900 now" says nothing of what 1900 is: the statement carries the sentence that
    does, so the memory can tell the rent's new value from anything else's."""
    turns = [("user", "landlord raised the rent. its 1900 now starting next month. ugh")]
    [statement] = statements.key_statements(turns)
    assert statement.text == "landlord raised the rent. its 1900 now starting next month."
    old = 'The user said: "rent 1650." The user said: "car insurance 95."'
    assert retention.stale_sentences(old, f'The user said: "{statement.text}"') == [
        'The user said: "rent 1650."'
    ]
    # ...and a daughter's school start is not the rent.
    nora = 'The user said: "my daughter nora starts in fall 2027."'
    assert retention.stale_sentences(nora, f'The user said: "{statement.text}"') == []


def test_a_decimal_with_a_comma_is_a_value():
    said = "el año pasado la nota de corte fue 12,84 asi q no"
    assert statements.statement_score(said, "user") > 0


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # Words about when ("semana", "semanal") say nothing of what.
        ("La sesión semanal pasa a ser los jueves a las 17:30.",
         "El examen final se ha retrasado una semana: ahora es el 21 de mayo."),
        # A record of something done, by its reference, is not a topic's value...
        ("Assistant scheduled a FreshCart grocery delivery for Thursday 6-8pm (order FC-20931).",
         "User now does the big grocery shop at Costco after getting a membership."),
        # ...and two references are two records.
        ("Te he reservado una clase de refuerzo el miércoles 7 de mayo a las 16:00, TR-3091.",
         "Te he reservado un simulacro el sábado 17 de mayo a las 10:00, código SIM-4827."),
    ],
)
def test_what_only_looks_like_a_new_value_retires_nothing(older, newer):
    assert retention.stale_sentences(older, newer) == []


def test_a_date_said_after_its_subject_is_retired_with_it():
    old = 'The user said: "j\'ai enfin eu un rdv a la prefecture !! le 12 mars à 9h40."'
    new = ('The user said: "la prefecture m\'a écrit, ils ont annulé mon créneau de mars, '
           'nouveau rdv mercredi 2 avril à 14h15."')
    assert retention.stale_sentences(old, new) == ['le 12 mars à 9h40."']
    # Its subject, left with no value, goes with it: the whole memory is retired.
    [step] = retention.refresh([retention.Candidate(1, old), retention.Candidate(0, new)])
    assert step.action == "delete"


def test_an_old_value_said_again_in_the_same_memory_goes_too():
    new = ('The assistant confirmed: "Desde esta semana la sesión fija queda los jueves a '
           'las 17:30."')
    said_twice = (
        'The user said: "me vendria bien los martes a las 18:00, q salgo a las 5 y pico." '
        'The assistant confirmed: "Te dejo apuntada la sesión semanal los martes a las 18:00."'
    )
    assert retention.stale_sentences(said_twice, new) == list(text.sentences(said_twice))
    # Not beside a name the new text leaves standing: that sentence says more.
    with_a_name = (
        'The user said: "me ve la profe Quintana los martes a las 18:00." '
        'The assistant confirmed: "Te dejo apuntada la sesión semanal los martes a las 18:00."'
    )
    assert retention.stale_sentences(with_a_name, new) == list(text.sentences(with_a_name)[1:])


def test_a_change_announced_in_german_retires_the_old_amount():
    old = 'The user said: "wir haben versandkostenfrei ab 39 €, kannst du das in den banner?"'
    new = 'The user said: "wir erhöhen auf 49 €, banner bitte auch anpassen."'
    assert retention.stale_sentences(old, new) == [old]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # One value said again is as often another thing at the same time or count.
        ("The standup is at 9:30. The gym class is at 9:30 on Saturdays.",
         "The standup moved to 10:00."),
        ("The user has 2 kids. The user has 2 cats.", "The user now has 3 kids."),
        ("The dentist appointment is at 10:00. The daughter's school starts at 10:00.",
         "The dentist moved the appointment to 11:30."),
    ],
)
def test_a_value_shared_by_chance_keeps_its_other_fact(older, newer):
    assert retention.stale_sentences(older, newer) == list(text.sentences(older)[:1])


@pytest.mark.parametrize(
    ("sentence", "kind", "value"),
    [
        ("so we're working with 77 grand total now", "money", "77000"),
        ("Le budget est de 40 mille euros.", "money", "40000"),
        ("Wir rechnen mit 80 Tausend Besuchern.", "number", "80000"),
        ("The base salary band tops out at $175k.", "money", "175000"),
        ("She wants to run the 10K in August.", "number", "10000"),
    ],
)
def test_an_amount_in_thousands_is_one_whole_amount(sentence, kind, value):
    assert (kind, value) in {(v.kind, v.value) for v in values.keyed_values(sentence)}


def test_an_amount_in_thousands_is_worth_keeping_and_grounds_its_whole_figure():
    said = "they've freed up more money, so we're working with 77 grand total now"
    assert statements.statement_score(said, "user")
    source = text.vocabulary(said)
    assert facts.is_grounded("The client's total budget is now $77,000.", source)
    assert not facts.is_grounded("The client's total budget is now $78,000.", source)
    # The same budget in other words, a new amount of it: the old one is retired.
    assert retention.stale_sentences(
        "The client's budget is $68,000 all in.", "The client's total budget is 77 grand now."
    )


def test_a_number_written_out_is_no_value_a_memory_must_keep():
    """Only grounding reads words as digits: "two children" does not carry "2 kids"."""
    assert not facts.covers("O usuário cuida dos dois filhos.", "Tenho 2 filhos.")


@pytest.mark.parametrize(
    "sentence",
    ["yo ibuprofeno no puedo tomar xq me da una gastritis terrible",
     "Ich habe seit Jahren Arthritis im Knie.",
     "desde el verano tengo una tendinitis en el hombro"],
)
def test_a_condition_in_its_greek_form_is_worth_keeping_in_any_language(sentence):
    assert statements.statement_score(sentence, "user")


@pytest.mark.parametrize(
    "sentence", ["ok lets do the diagnosis tomorrow", "I tried hypnosis once", "I suppose so"]
)
def test_words_that_only_end_like_a_condition_are_not_one(sentence):
    assert not statements.statement_score(sentence, "user")


@pytest.mark.parametrize(
    ("sentence", "not_read_as"),
    [
        ("We watched the 2025 Grand Prix at home.", "2025000"),
        ("We have 2 grand pianos in the hall.", "2000"),
        ("The house sold for $2.5 mil.", "2500"),
        ("Take vitamin B12k daily.", "12000"),
    ],
)
def test_what_only_looks_like_thousands_is_no_amount(sentence, not_read_as):
    assert not_read_as not in {v.value for v in values.keyed_values(sentence)}
    if "pianos" not in sentence:  # grounding reads "2 grand" as 2000 too: it only widens it
        assert not_read_as not in text.vocabulary(sentence)


def test_a_grand_prix_is_not_updated_by_another_grand_prix_amount():
    older = "The user's tickets for the Monaco Grand Prix cost €450."
    assert not retention.stale_sentences(
        older, "The user will now watch the 2025 Grand Prix from home."
    )


@pytest.mark.parametrize(
    "sentence",
    ["Entradas: tres por familia como máximo.", "Trois pour le prix de deux.",
     "Entradas: 3 por familia.", "Max 2 pour une chambre."],
)
def test_a_number_before_por_or_pour_alone_is_no_share(sentence):
    assert not [v for v in values.keyed_values(sentence) if v.kind == "percent"]


def test_a_made_up_name_is_not_grounded_by_a_longer_word():
    """"Frank" is not in "Frankfurt": a name must be in the conversation whole."""
    source = text.vocabulary("Ich fliege am Montag nach Frankfurt zur Messe, Abflug 7:40.")
    assert not facts.is_grounded("Der Nutzer fliegt mit Frank zur Messe, Abflug 7:40.", source)


def test_a_word_of_one_language_stays_a_name_or_a_value_in_another():
    """Dutch function words that are names elsewhere ("Van Nguyen") must still be grounded;
    Dutch "onze" (our) is French and Portuguese eleven."""
    source = text.vocabulary("My contractor is Nguyen, he starts Monday.")
    assert not facts.is_grounded("The user's contractor Van Nguyen starts Monday.", source)


@pytest.mark.parametrize(
    "said",
    ["We meet at half eight.", "Das dauert eine halbe Stunde.", "I have two kids and half a day."],
)
def test_half_an_hour_is_no_time_of_day(said):
    """"Half" takes an hour in its own language's words only: English "half eight" is 8:30,
    Dutch "half acht" 7:30, so neither reading is guessed for the English."""
    assert not [v for v in values.keyed_values(said) if v.kind == "time"]


@pytest.mark.parametrize(
    ("written", "sentences"),
    [
        ("Vi gifter oss lørdag 21. juni. Festen blir på Sole gård.",
         ("Vi gifter oss lørdag 21. juni.", "Festen blir på Sole gård.")),
        ("Smaksprøving torsdag 6. mars kl. 18:00 i Drammen. Referansen er SMK-114.",
         ("Smaksprøving torsdag 6. mars kl. 18:00 i Drammen.", "Referansen er SMK-114.")),
        ("Leczenie u dr. Kowalczyka kosztuje 1450 zł. Dobrze.",
         ("Leczenie u dr. Kowalczyka kosztuje 1450 zł.", "Dobrze.")),
        ("Tezini artık Doç. Dr. Elif Karaca yönetiyor.",
         ("Tezini artık Doç. Dr. Elif Karaca yönetiyor.",)),
        ("We landed on the 3rd. Then we drove.", ("We landed on the 3rd.", "Then we drove.")),
    ],
)
def test_an_ordinal_date_or_an_abbreviation_ends_no_sentence(written, sentences):
    assert text.sentences(written) == sentences


@pytest.mark.parametrize(
    "question", ["Is 2024-2025 the season?", "Can 100-200 people fit?", "Is 80% too high?"]
)
def test_a_question_with_a_range_or_a_share_is_no_statement(question):
    assert statements.statement_score(question, "user") == 0


@pytest.mark.parametrize(
    ("value", "written", "left"),
    [
        ("601442913", "SMS na 601 442 913, maili", "SMS na …, maili"),
        ("1250", "$1,250.00, 1.250 € or 1 250", "$…, … € or …"),
        ("12.50", "12,50 € and 12.50", "… € and …"),
        ("07:10", "the bus comes at 7:10 at stop 14B", "the bus comes at … at stop 14B"),
        ("nb-0217", "NB-0217, once NB0217", "…, once …"),
        ("930", "rent 930 €, visits at 9:30", "rent … €, visits at 9:30"),
        ("40213", "badge 40213, locker 402-13", "badge …, locker 402-13"),
        ("15", "on 15/04/2024, code 15.", "on 15/04/2024, code …."),
        ("12", "1-2 and 2024-04-12", "1-2 and 2024-04-12"),
        ("442", "phone 601 442 913, room 442.", "phone 601 442 913, room …."),
    ],
)
def test_a_value_is_found_where_a_text_writes_it_and_nowhere_else(value, written, left):
    """An old value is left out where the text writes it in digits, in any grouping, and
    never out of another value: "930" is not "9:30", "15" not a date's day."""
    assert written_forms.written_in_digits(value).sub("…", written) == left
