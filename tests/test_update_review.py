"""A trusted model is asked which earlier memories a new one gives newer values for: it sees
updates the checks cannot read ("free shipping from 39 €" and "Gratisversand ab 49 €"), and
its claims are applied only where they cannot be shown wrong."""

from __future__ import annotations

import json
import logging

import pytest

from memory_agent import ChatMessage, MemoryCreationRequest, MemorySubAgent, update_claims
from memory_agent.retention import NEW_MEMORY_ID, Candidate, Step
from tests.conftest import install_app
from tests.fakes import (
    CREATION_PREFIX,
    UPDATE_PREFIX,
    ModelCall,
    friend_fact,
    friend_memories,
    memory_lines,
    memory_model,
)

pytestmark = pytest.mark.anyio

OLD_SHIPPING = "Free shipping in the user's shop starts at 39 €."
NEW_SHIPPING = "Gratisversand gibt es jetzt erst ab 49 €."
ALLERGY = "The user is allergic to shellfish."
STATED = {
    OLD_SHIPPING: "Free shipping in my shop starts at 39 €.",
    NEW_SHIPPING: NEW_SHIPPING,
    ALLERGY: "I am allergic to shellfish.",
}


def writes_faithfully(call: ModelCall) -> str:
    """The friend memories, and the memories above for the statements above."""
    for memory, said in STATED.items():
        if f"User: {said}" in call.prompt:
            return memory
    return friend_memories()(call)


def request(n: int, said: str) -> MemoryCreationRequest:
    return MemoryCreationRequest(
        "app", f"c{n}", [ChatMessage("user", said), ChatMessage("assistant", "Noted.")]
    )


async def trusted_agent(database, clock, updates) -> tuple[MemorySubAgent, list[ModelCall]]:
    """An agent whose model has written ten faithful memories (so it is trusted), then the
    allergy and the old shipping threshold; `updates` answers the update review."""
    await install_app(database, "app")
    model = memory_model(writes_faithfully, updates=updates)
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=20)
    for n in range(1, 11):
        await agent.create_memory(request(n, friend_fact(n)))
    await agent.create_memory(request(11, STATED[ALLERGY]))
    await agent.create_memory(request(12, STATED[OLD_SHIPPING]))
    return agent, model.calls


def claiming(*texts: str):
    def answer(call: ModelCall) -> str:
        ids = [i for i, line in memory_lines(call).items() if i and line in texts]
        return json.dumps({"updatedMemoryIds": ids, "reason": "a newer threshold"})

    return answer


async def live(agent: MemorySubAgent) -> list[str]:
    return [m.content for m in await agent.list_memories("app")]


async def test_a_trusted_models_update_retires_what_the_checks_cannot_read(database, clock):
    agent, calls = await trusted_agent(database, clock, claiming(OLD_SHIPPING))
    old = next(m for m in await agent.list_memories("app") if m.content == OLD_SHIPPING)

    created = await agent.create_memory(request(13, NEW_SHIPPING))

    [step] = created.compactions
    assert (step.action, step.target_memory_id, step.decided_by) == ("delete", old.id, "model")
    assert step.update and step.outcome == "update"
    assert "the new memory updates it: a newer threshold" in step.reason
    assert OLD_SHIPPING not in await live(agent) and NEW_SHIPPING in await live(agent)
    [review] = [c for c in calls if c.prompt.startswith(UPDATE_PREFIX)][-1:]
    # Only memories with a value of a kind the new one gives anew are shown (an amount
    # here): not the allergy, nor the friends' cities.
    assert memory_lines(review) == {NEW_MEMORY_ID: NEW_SHIPPING, old.id: OLD_SHIPPING}
    assert review.json_schema is not None
    assert review.json_schema["properties"]["updatedMemoryIds"]["items"]["enum"] == [old.id]
    [event] = [e for e in await agent.history("app") if e.memory_id == old.id][-1:]
    assert (event.event, event.actor) == ("deleted", "model")


async def test_a_claim_on_a_memory_the_new_one_cannot_update_is_not_applied(database, clock):
    """The model names every memory shown, the new one, the allergy (not shown: no value the
    new memory could replace) and an id of no memory: only the old threshold goes."""
    named: list[int] = []

    def claims_too_much(call: ModelCall) -> str:
        ids = [*memory_lines(call), 9999, *named] if named else []
        return json.dumps({"updatedMemoryIds": ids, "reason": "everything"})

    agent, _ = await trusted_agent(database, clock, claims_too_much)
    by_text = {m.content: m.id for m in await agent.list_memories("app")}
    named.append(by_text[ALLERGY])

    created = await agent.create_memory(request(13, NEW_SHIPPING))

    assert [(s.action, s.target_memory_id) for s in created.compactions] == [
        ("delete", by_text[OLD_SHIPPING])
    ]
    assert ALLERGY in await live(agent)
    assert len(await live(agent)) == 12  # ten friends, the allergy, the new threshold


async def test_a_failed_review_retires_nothing_and_says_so(database, clock, caplog):
    agent, _ = await trusted_agent(database, clock, "not json")

    with caplog.at_level(logging.WARNING, logger="mnemoloop.memory"):
        created = await agent.create_memory(request(13, NEW_SHIPPING))

    assert created.compactions == []
    assert OLD_SHIPPING in await live(agent) and NEW_SHIPPING in await live(agent)
    assert "review of what a new memory updates failed" in caplog.text


async def test_a_model_that_is_not_trusted_is_never_asked(database, clock):
    """A model whose memories say what the conversations do not is not asked to judge
    updates: the checks alone decide, and no call is spent."""
    await install_app(database, "app")
    model = memory_model("The user is 25 years old.", updates=claiming(OLD_SHIPPING))
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=20)
    for n in range(1, 13):
        await agent.create_memory(request(n, friend_fact(n)))
    await agent.create_memory(request(13, STATED[OLD_SHIPPING]))
    await agent.create_memory(request(14, NEW_SHIPPING))

    assert not model.calls_starting_with(UPDATE_PREFIX)
    assert model.calls_starting_with(CREATION_PREFIX)  # asked to write, as before
    assert len(await live(agent)) == 14


async def test_a_model_faithful_from_its_first_sentences_is_asked_before_its_record_is_known(
    database, clock
):
    """Three faithful memories are too few for trust, but enough for the model to be asked
    which memories a new one updates: its claim, checked, keeps the space current from the
    start."""
    await install_app(database, "app")
    model = memory_model(writes_faithfully, updates=claiming(OLD_SHIPPING))
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=20)
    await agent.create_memory(request(1, friend_fact(1)))
    await agent.create_memory(request(2, STATED[ALLERGY]))
    await agent.create_memory(request(3, STATED[OLD_SHIPPING]))
    assert not agent._writer.trusted

    await agent.create_memory(request(4, NEW_SHIPPING))

    assert len(model.calls_starting_with(UPDATE_PREFIX)) == 1
    assert OLD_SHIPPING not in await live(agent)
    assert NEW_SHIPPING in await live(agent)


# -- the checks on a claim, without a database ------------------------------------------------


def candidates(*texts: str) -> list[Candidate]:
    *older, newest = texts
    return [
        *(Candidate(i, text) for i, text in enumerate(older, start=1)),
        Candidate(NEW_MEMORY_ID, newest),
    ]


def test_only_the_sentences_with_the_replaced_value_go():
    memories = candidates(
        "The party is at Harrow Mill Barn on 14 June. Guests arrive at 7pm.",
        "Guests now arrive at 5:30pm.",
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step(
        "edit", 1, "r", "The party is at Harrow Mill Barn on 14 June."
    )


def test_a_sentence_holding_a_value_no_other_memory_has_is_kept():
    """Dropping "at Harrow Mill Barn" with the old time would lose the venue."""
    memories = candidates(
        "Guests arrive at 7pm at Harrow Mill Barn.", "Guests now arrive at 5:30pm."
    )
    assert update_claims.claimed_update(memories, 1, "r") is None
    memories = candidates(
        "Guests arrive at 7pm at Harrow Mill Barn.",
        "The venue is Harrow Mill Barn.",
        "Guests now arrive at 5:30pm.",
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step("delete", 1, "r")


def test_a_claim_with_no_value_of_a_kind_the_new_memory_gives_is_refused():
    memories = candidates(ALLERGY, "Guests now arrive at 5:30pm.")
    assert update_claims.claimed_update(memories, 1, "r") is None
    assert update_claims.claimed_update(memories, NEW_MEMORY_ID, "r") is None
    assert update_claims.claimed_update(memories, 42, "r") is None


def test_what_the_stale_sentence_spoke_of_goes_with_it_in_any_case():
    """The user's own words name the store in lower case (no value the checks can read);
    they speak of what the confirmation did, and go with it."""
    memories = candidates(
        'The user said: "when its fixed can you send it to the cabot circus store instead." '
        'The assistant confirmed: "Return delivery set to our Cabot Circus store."',
        "The assistant confirmed: \"I've redirected your laptop to our St David's store in "
        'Cardiff now."',
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step("delete", 1, "r")


def test_the_replaced_value_said_again_in_lower_case_goes_too():
    """"the cabot circus store" says the replaced store again, in words the value rules do
    not read as a name, beside a word of a lasting kind ("flat"): it goes with the
    confirmation. A sentence that also holds a value no other memory has stays."""
    redirected = (
        "The assistant confirmed: \"I've redirected your laptop to our St David's store in "
        'Cardiff now."'
    )
    memories = candidates(
        'The user said: "when its fixed can you send it to the cabot circus store instead of '
        'my flat?" The user said: "i always collect from there, its next to my gym." '
        'The assistant confirmed: "Return delivery set to our Cabot Circus store."',
        redirected,
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step(
        "edit", 1, "r", 'The user said: "i always collect from there, its next to my gym."'
    )
    memories = candidates(
        'The user said: "the cabot circus store opens at 9am." '
        'The assistant confirmed: "Return delivery set to our Cabot Circus store."',
        redirected,
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step(
        "edit", 1, "r", 'The user said: "the cabot circus store opens at 9am."'
    )


@pytest.mark.parametrize(
    ("older", "newer", "kept"),
    [
        ("The party is on 3 June at 10am. The user has 3 kids.",
         "The party moved to 5 June at 11am.", "The user has 3 kids."),
        ("The rent is 900 euros. The user lives with 900 books.",
         "The rent is now 950 euros.", "The user lives with 900 books."),
        ("The gym is Anytime Fitness on Park Street. The user runs in the park every morning.",
         "The gym is now PureGym on Mill Road.", "The user runs in the park every morning."),
        ("The user banks with Bank of America. The user likes to bank online at 9am.",
         "The user now banks with Chase Bank instead.",
         "The user likes to bank online at 9am."),
    ],
)
def test_only_a_whole_replaced_name_said_again_goes(older, newer, kept):
    """A number or a word that a replaced value shares by chance is another fact."""
    memories = candidates(older, newer)
    assert update_claims.claimed_update(memories, 1, "r") == Step("edit", 1, "r", kept)


def test_a_replaced_name_is_found_again_whatever_its_apostrophe():
    memories = candidates(
        "The user's favourite bar is Jo’s Bar. The user said: \"my partner and i always meet "
        "at jo's bar.\"",
        "The user's favourite bar is now The Crown instead.",
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step("delete", 1, "r")


def test_a_claim_never_takes_a_fact_with_it():
    """A sentence without a value may hold a fact ("vegetarian"): it stays, and so does an
    amount of something else that the new one does not speak of (no word, no topic, no
    change in common): such a claim is refused."""
    memories = candidates(
        "Free shipping in the user's shop starts at 39 €. The user's partner is vegetarian.",
        NEW_SHIPPING,
    )
    assert update_claims.claimed_update(memories, 1, "r") == Step(
        "edit", 1, "r", "The user's partner is vegetarian."
    )
    memories = candidates("The user's rent is 1650 euros.", "The gym membership is 45 euros.")
    assert update_claims.claimed_update(memories, 1, "r") is None


# -- what is worth keeping: a trusted model decides beyond what the checks can see -------------

RUNBOOKS = (
    "add a runbook link to that alert. runbooks are all kept in the sre handbook repo, in a "
    "folder per service"
)
RUNBOOK_MEMORY = "Runbooks are all kept in the sre handbook repo, in a folder per service."


async def test_a_trusted_model_is_asked_where_the_checks_see_nothing(database, clock):
    """No value and no first person: the checks see nothing worth keeping. A model that has
    written faithful memories is asked anyway, and its impersonal but grounded record is
    kept; one that has not is not asked (no call, no memory)."""

    def writes(call: ModelCall) -> str:
        if "sre handbook" in call.prompt:
            return RUNBOOK_MEMORY
        if "capital of France" in call.prompt:
            return "NOTHING"
        if "weather" in call.prompt:
            return "The office wifi password is Hunter42 and the gateway is vpn9.example.org."
        return friend_memories()(call)

    await install_app(database, "app")
    model = memory_model(writes)
    agent = MemorySubAgent(database, model, clock=clock, memory_limit=20)
    small_talk = MemoryCreationRequest(
        "app", "talk", [ChatMessage("user", "What's the capital of France?"),
                        ChatMessage("assistant", "Paris.")]
    )
    first = await agent.create_memory(request(0, RUNBOOKS))
    assert first.memory is None and not model.calls  # not trusted yet: not asked

    for n in range(1, 11):
        await agent.create_memory(request(n, friend_fact(n)))
    created = await agent.create_memory(request(11, RUNBOOKS))
    talk = await agent.create_memory(small_talk)

    invented = await agent.create_memory(MemoryCreationRequest(
        "app", "weather", [ChatMessage("user", "how is the weather in general in spring"),
                           ChatMessage("assistant", "Mild, mostly.")]
    ))

    assert created.memory is not None and created.memory.content == RUNBOOK_MEMORY
    assert talk.memory is None  # the model answered NOTHING
    # Impersonal is allowed a trusted model, ungrounded is not: nothing is kept.
    assert invented.memory is None
    assert sum("weather" in c.prompt for c in model.calls) == 1
    assert sum("capital of France" in c.prompt for c in model.calls) == 1


def test_only_a_tied_value_is_shown_to_the_model():
    """An amount of something else, with no word, topic or change in common, is not shown:
    the model is not asked about the rent when the gym membership is written."""
    rent, gym = "The user's rent is 1650 euros.", "The gym membership is 45 euros."
    assert not update_claims.may_update(rent, gym)
    assert update_claims.may_update(OLD_SHIPPING, NEW_SHIPPING)  # a change announced: "jetzt"
    assert update_claims.may_update("The rent is 1650 euros.", "The rent is 1700 euros.")  # "rent"
    assert not update_claims.may_update(ALLERGY, NEW_SHIPPING)  # no value of that kind


def test_a_name_both_memories_hold_is_no_tie():
    """Two facts of one person or place: a claim that one updates the other is refused."""
    older = "Dr. Patel prescribed 20 mg of sertraline."
    newer = "Dr. Patel's office opens at 8am on 12 May."
    assert not update_claims.may_update(older, newer)
    assert update_claims.claimed_update(candidates(older, newer), 1, "r") is None
    assert not update_claims.may_update(
        "The user's flight to Lisbon leaves at 9:40.", "The hotel in Lisbon has check-in at 15:00."
    )


def test_the_name_a_new_value_stands_beside_ties_it_to_a_memory_naming_that():
    """"a EC em 1,4" is the EC's value: a memory naming the EC with another such value may be
    claimed updated, and the claim takes its old value away; a name the two merely mention
    is still no tie."""
    older = "O usuário mantém a condutividade (EC) da solução nutritiva em 1,8 mS/cm."
    newer = "No verão o agrônomo recomendou trabalhar com a EC em 1,4."
    assert update_claims.may_update(older, newer)
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step is not None and step.action == "delete"
    assert update_claims.may_update(
        "The staging box runs Postgres 13.",
        "Benchmarks were taken on Postgres 15 across the fleet.",
    )
    assert not update_claims.may_update(
        "The staging box runs Postgres 13.", "Benchmarks were taken on Redis 7 across the fleet."
    )


def test_an_old_value_said_again_beside_its_new_one_may_be_claimed_as_history():
    """"van 8,5 naar elf procent" beside 11%: the old 8,5% memory may be claimed updated and
    goes; a name said again is not history (it is as often whom both speak of)."""
    older = "Het bedrijf rekent een brandstoftoeslag van 8,5% bovenop het kilometertarief."
    newer = ("De brandstoftoeslag bovenop het kilometertarief is verhoogd naar 11%. "
             'The user said: "van 8,5 naar elf procent, per direct."')
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step is not None and step.action == "delete"
    allergy = "O Heitor tem alergia grave a amendoim."
    van = "O transporte escolar do Heitor agora é a van da dona Cida."
    assert update_claims.claimed_update(candidates(allergy, van), 1, "r") is None


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The user's son Max has swimming practice at 5pm.",
         "The school bus picks up Max at 7:10."),
        ("The user's dog Brando gets his heartworm pill on the 1st.",
         "The groomer sees Brando on the 14th."),
        ("Die Praxis von Dr. Weber öffnet um 8 Uhr.", "Der Termin bei Dr. Weber ist um 10 Uhr."),
        ("The user's gym membership costs $40 a month.",
         "The user's streaming now costs $40 a month and the phone plan $25 a month."),
        ("Le vaccin de Léa est le 14/06.",
         "Maintenant le dentiste de Léa est le 14/06 et l'ophtalmo le 20/06."),
    ],
)
def test_a_person_both_speak_of_or_a_value_both_hold_is_no_claim(older, newer):
    """Whom two memories speak of, or a value the newer gives something else, does not let a
    claim take the older memory."""
    assert update_claims.claimed_update(candidates(older, newer), 1, "r") is None


def test_a_reference_said_again_beside_its_successor_may_be_claimed_replaced():
    """The new memory names the broken laptop NB-0217 and its replacement NB-0262 of the same
    series, in words the old memory does not share: the claim stands. A reference of another
    series, or one the new memory names without a successor, is no such tie."""
    older = "Friederike Dallmann arbeitet mit dem Notebook mit der Inventarnummer NB-0217."
    newer = ('The user said: "Das NB-0217 von Friederike hat den Kaffee nicht überlebt." '
             'The user said: "Ich hab ihr das Ersatzgerät gegeben, Aufkleber NB-0262."')
    keeps_name = "Friederike Dallmann hat einen Monitor MO-0119."
    step = update_claims.claimed_update(candidates(older, keeps_name, newer), 1, "r")
    assert step == Step("delete", 1, "r")
    other_series = newer.replace("NB-0262", "MO-0262")
    assert update_claims.claimed_update(candidates(older, keeps_name, other_series), 1, "r") is None


def test_only_the_clause_of_a_replaced_time_goes_from_a_long_quote():
    """A quote holding a drive's stops loses the clause of the bakery's old time, said in
    words in the new memory ("kwart over zes"), and keeps the rest, which holds a reference no
    other memory has."""
    older = ('The user said: "Hij haalt eerst het brood bij Bakkerij Oosterhof in Kampen, dat '
             'staat elke dag om 05:30 klaar, en levert daarna order VR-4471 af in Almere."')
    newer = ('The user said: "Vanaf maandag is het brood in Kampen pas kwart over zes klaar, '
             'ze hebben een nieuwe oven."')
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step is not None and step.action == "edit" and step.new_content is not None
    assert "05:30" not in step.new_content
    assert step.new_content == (
        'The user said: "Hij haalt eerst het brood bij Bakkerij Oosterhof in Kampen, … en '
        'levert daarna order VR-4471 af in Almere."'
    )


def test_a_replaced_number_leaves_a_clause_that_holds_another_fact():
    """The old phone number goes from both sentences that say it, the second tied by the
    number alone; what goes by SMS, said nowhere else, stays."""
    older = ('Przypomnienia SMS o wizytach mają przychodzić na numer 601 442 913. The user said: '
             '"Jeśli tak, to najlepiej SMS-em na 601 442 913, maili i tak nie czytam."')
    newer = "Nowy numer kontaktowy użytkownika to 512 090 377."
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step == Step("edit", 1, "r", (
        'Przypomnienia SMS o wizytach mają przychodzić na numer …. The user said: '
        '"Jeśli tak, to najlepiej SMS-em na …, maili i tak nie czytam."'))


@pytest.mark.parametrize(
    ("older", "newer", "kept"),
    [
        ("The user's rent is 930 € and the landlord visits at 9:30 on Mondays.",
         "The user's rent is now 980 €.", "9:30"),
        ("The user takes vitamin B12 tablets every morning. Their B12 level was 180 in March.",
         "The user now takes vitamin D3 tablets every morning.", "Their B12 level was 180"),
        ("The user's savings goal is 12 500 €. They drive 12 500 km a year.",
         "The user's savings goal is now 15 000 €.", "They drive 12 500 km a year."),
    ],
)
def test_a_replaced_value_leaves_no_other_value(older, newer, kept):
    """A time that holds the old rent's digits, a short code said again of another thing, or
    the same digits of another kind, is no old value."""
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step is None or kept in (step.new_content or "")


def test_a_clause_is_not_dropped_for_a_name_alone():
    """Names are replaced wherever the new memory names anyone else: a clause that holds
    only names stays when its sentence holds a fact no other memory has."""
    older = ('The user said: "Order VR-4471 goes to Bakkerij Oosterhof in Kampen, then to '
             'Lelystad and Almere."')
    newer = 'The user said: "Can we reach Zwolle before 7:30?"'
    assert update_claims.claimed_update(candidates(older, newer), 1, "r") is None


@pytest.mark.parametrize(
    ("older", "newer", "tied"),
    [({"plan"}, {"plann"}, True), ({"rekla"}, {"rekla"}, True),
     ({"bus"}, {"busin"}, False), ({"car"}, {"cardi"}, False), ({"tea"}, {"teach"}, False)],
)
def test_a_word_in_another_form_ties_a_claim(older, newer, tied):
    """A word beside the values of both in another form ("plan", "planning") ties them; a
    word of three letters starts too many others ("bus", "business")."""
    assert update_claims._keys_meet(frozenset(older), frozenset(newer)) is tied


def test_a_clause_in_brackets_or_the_first_clause_never_goes():
    older = ('The user said: "The bus (leaves 7:40, not on Sundays) stops at S-14, near the '
             'school gate."')
    newer = "The user's bus now leaves at 7:55."
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert step is None or "not on Sundays)" in (step.new_content or "")


@pytest.mark.parametrize(
    ("older", "newer", "claim_stands"),
    [
        ("The user's deductible is $1,250.",
         "After the policy renewal the user pays the first $2,500 of any claim.", True),
        ("Matbudsjettet er rundt 950 kr per kuvert.",
         "Paret kan nå bruke opptil 1 200 kr per person på maten.", True),
        ("The user's rent is 1650 euros.", "The gym membership is 45 euros.", False),
        ("The user's deductible is $1,250.",
         "The user pays $2,500 for the roof and $400 for the gutters.", False),
    ],
)
def test_one_amount_for_another_of_its_size_ties_a_claim(older, newer, claim_stands):
    """In any words, one amount for one other of its size may be the same thing's new value;
    amounts far apart, or a new memory of several amounts, tie nothing."""
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert (step == Step("delete", 1, "r")) is claim_stands


@pytest.mark.parametrize(
    ("older", "newer", "claim_stands"),
    [
        ("Kullanıcının tez danışmanı Prof. Dr. Selim Aydın.",
         "Kullanıcının tezini artık Doç. Dr. Elif Karaca yönetiyor.", True),
        ("Kullanıcının tez danışmanı Prof. Dr. Selim Aydın.",
         "Kullanıcı kütüphanede Bayan Elif Karaca ile görüştü.", False),
        ("Kullanıcının tez danışmanı Prof. Dr. Selim Aydın ve Dr. Can Demir.",
         "Kullanıcının tezini Doç. Dr. Elif Karaca yönetiyor.", False),
    ],
)
def test_one_titled_person_for_another_ties_a_claim(older, newer, claim_stands):
    """In any words, one person for one other of the same title may be the new holder of
    the same role; another title, or two people on either side, ties nothing."""
    step = update_claims.claimed_update(candidates(older, newer), 1, "r")
    assert (step is not None) is claim_stands
