"""The few words of each language that the memory checks need, and nothing else.

The checks rest on what holds in any language: values (numbers, dates, amounts, codes,
versions, hosts, names), who stated or confirmed them, and which words a value stands beside
(what it is the value of). A handful of small word classes help where a value alone cannot
tell: who speaks of themselves ("I", "mi", "ich"), what an assistant says when it has done
something ("booked", "reservado", "gebucht"), what announces a change ("now", "ahora",
"jetzt"), and function words, which never name what a value is the value of.

Covered: English, Spanish, French, German, Portuguese, Italian and Dutch. Every class is the union
over the languages (a sentence's language is never guessed). To add a language, add one
`Words` entry to `LANGUAGES` with its words in lower case ("_" joins a phrase's words). Text in a
language not covered still gets every check that rests on values alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Words:
    # Words by which a speaker speaks of themselves (pronouns, possessives, and in languages
    # that drop the pronoun, the commonest first-person verbs).
    first_person: str
    # Words that address someone: a memory records, it does not speak to anyone.
    second_person: str
    # How a memory names the user.
    user: str
    # A sentence starting with one of these and ending in "?" asks about the world.
    question: str
    # What an assistant says when it did something the user will want remembered.
    confirmation: str
    # What announces a new value of something.
    change: str
    # How people state a standing instruction.
    standing: str
    # Words that mark a lasting personal fact without a value (allergic, daughter, prefer).
    lasting: str
    # Function words: they never say what a value is the value of.
    stopwords: str
    # Days and months, which are values whatever their case; days also as they say "on
    # Tuesdays" ("terças", "montags", "sextas-feiras").
    calendar: str
    # People and animals other than the speaker: a value said of one of them is theirs.
    people: str = ""
    # Words about when, not what ("week", "semana", "Woche"): two texts sharing them do not
    # speak of the same thing, and they never say what a value is the value of.
    time: str = ""
    # What puts an end date to something ("remember it until Friday").
    until: str = ""
    # The twelve months and the seven days of the week (Monday first), in order; "|"
    # separates a name's other spellings.
    months: str = ""
    weekdays: str = ""
    # The numbers two to twenty written out, in order ("one" is as often an article: "un",
    # "ein"); "|" separates a number's other spellings. A word that is also an ordinary word or
    # a name in a covered language ("due", "once", "dos", "sei", "Otto") is left out in
    # `text.SPELLED_NUMBERS`.
    numbers: str = ""
    # "One" as an hour is named ("la una", "ein Uhr"), and the times of day said in words: each
    # a pattern ("_" a space, {h} the hour in words or digits, `?` what may be left out, <a|b>
    # a word one of which must come first), "=" the minutes it adds to that hour
    # ("quarter_past_{h}=15", Dutch "half_{h}=-30", 7:30 for "half acht"). Where the same words
    # also say a duration or a count ("una y media horas", "entre dez e quinze"), the pattern
    # starts with the word that says "at". A bare "half {h}" takes the hour in words only:
    # "half 8" is 8:30 in English and 7:30 in Dutch.
    one: str = ""
    clock: str = ""
    # Titles a person's name follows ("dr.", "signora"): the word after one is a name whatever
    # its case, and the title itself none. A title written with a full stop is an
    # abbreviation, whose full stop ends no sentence ("Dr. Hollis").
    titles: str = ""


ENGLISH = Words(
    first_person="i i'm im i've ive i'd i'll my mine me myself we we're we've our ours us",
    second_person="you your you're you've yours",
    user="user user's",
    question="what whats what's how why when where who which can could do does is are should",
    confirmation="""booked reserved scheduled confirmed registered ordered added set_up
    signed_you_up created saved arranged cancelled canceled moved_your rescheduled subscribed
    enrolled paid transferred sent noted switched_you changed_your upgraded renewed opened
    filed logged raised issued assigned silenced updated counted passed i've i_have i've_just
    let_them_know let_the you're_all_set you_are_all_set you're_booked
    submitted placed requested confirmation_number confirmation_code reference_number
    reference_code order_number ticket_number case_number claim_number""",
    change="""now moved changed switch switched no_longer anymore any_more instead new updated
    update raised increased decreased lowered cut bumped upped dropped went_up went_down
    from_now_on these_days started stopped quit replaced upgraded migrated rescheduled
    postponed pushed shifted starting_next starting_from from_next""",
    standing="""remember don't_forget note_that keep_in_mind from_now_on going_forward
    you_should_know just_so_you_know fyi for_the_record can't_stand tastes_like""",
    lasting="""allergic allergy allergies intolerant intolerance vegetarian vegan gluten
    lactose dairy diabetic diabetes celiac kosher halal pregnant medication medicine condition
    asthma injury knee back surgery doctor diagnosed name named called son daughter kid kids
    child children baby wife husband partner boyfriend girlfriend mom mum mother dad father
    sister brother grandma grandmother grandpa family twins dog cat pet puppy kitten live
    lives living moved moving home house apartment flat address city town neighborhood work
    works job office employer company boss manager team role career hired promoted startup
    school university college studying student teacher nurse engineer budget salary income
    rent mortgage savings debt loan afford spend limit max maximum price cost birthday
    anniversary wedding born deadline due exam appointment goal goals babysitter babysitting
    nanny sitter tutor therapist dentist vet church bank account credit card insurance pension
    sick seasick carsick migraine migraines nausea disease chronic disorder syndrome diagnosis
    illness cancer prefer prefers preferred favorite favourite hate hates dislike always never
    usually every weekly daily routine remember forget avoid plan planning training marathon
    diet""",
    stopwords="""a about above after again against all also am an and any are as at be because
    been before being below between both but by can could did do does doing done down during
    each few for from further get got had has have having he her here hers herself him himself
    his how i i'd i'll i'm i've if in into is it it's its itself just let's like me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same
    she should so some such than that that's the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself yourselves im ive id ill dont don't
    can't cant won't wont isn't wasn't let really please thanks thank ok okay yes yeah hi hello
    hey sure well oh great good nice cool lol one also maybe just still much many lot lots
    something anything thing things way bit kind sort us we're we've they're there's what's
    user users assistant conversation mentioned mentions said says asked asks told stated
    states noted memory record wants wanted shared would about around""",
    time="""year day week month today tomorrow yesterday tonight last next ago time morning
    evening night weekend later soon earlier hour minute
    start starts starting begin begins beginning after before during""",
    calendar="""monday tuesday wednesday thursday friday saturday sunday mondays tuesdays
    wednesdays thursdays fridays saturdays sundays jan january feb february mar march apr april
    jun june jul july aug august sep sept september oct october nov november dec december""",
    people="""son daughter kid kids child children baby wife husband partner boyfriend
    girlfriend mom mum mother dad father sister brother grandma grandmother grandpa grandfather
    aunt uncle cousin cousins niece nephew friend friends neighbor neighbour colleague coworker
    boss roommate relatives dog cat pet puppy kitten""",
    until="until till til 'til through up_to_and_including",
    months="""january|jan february|feb march|mar april|apr may june|jun july|jul august|aug
    september|sep|sept october|oct november|nov december|dec""",
    weekdays="""monday|mon tuesday|tue|tues wednesday|wed thursday|thu|thurs friday|fri
    saturday|sat sunday|sun""",
    numbers="""two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty""",
    one="one",
    clock="""quarter_past_{h}=15 half_past_{h}=30 quarter_to_{h}=-15 {h}_o'clock=0""",
    titles="mr. mrs. ms. miss dr. prof.",
)

SPANISH = Words(
    first_person="""yo mi mis me conmigo mío mía nosotros nosotras nuestro nuestra nuestros
    nuestras nos estoy tengo trabajo quiero necesito prefiero puedo hago estudio voy
    tenemos somos vivimos""",
    second_person="tú usted ustedes te ti contigo",
    user="usuario usuaria",
    question="qué que cómo como cuándo dónde quién cuál cuánto cuánta puedes hay",
    confirmation="""reservé reservado reservada he_reservado confirmado confirmada confirmé
    programado programada agendado agendada registrado registrada inscrito inscrita creado
    creada enviado enviada pedido anotado anotada apuntado apuntada listo lista número_de
    código_de referencia te_he le_he ya_he he_cambiado he_movido he_añadido te_dejo queda
    quedan""",
    change="""ahora ya_no retrasado retrasada adelantado adelantada pasar cambió cambiado
    cambiamos cambio nuevo nueva en_vez_de en_lugar_de movido movida trasladado trasladada pasó
    pasa_a a_partir_de desde_ahora aplazado aplazada subido bajado desde_esta desde_este
    desde_hoy desde_mañana actualizado actualizada actualizamos actualicé""",
    standing="recuerda acuérdate no_olvides ten_en_cuenta a_partir_de_ahora para_que_lo_sepas",
    lasting="""alérgico alérgica alergia vegetariano vegetariana vegano vegana diabetes hijo
    hija hijos esposa esposo marido mujer pareja perro gato casa piso dirección alquiler
    sueldo salario presupuesto cumpleaños trabajo empresa jefe jefa colegio escuela
    universidad examen profesor profesora prefiero odio nivel""",
    stopwords="""el la los las un una unos unas de del al y o u en con sin por para que se es
    está están son ser estar lo le les su sus mi mis tu tus me te nos muy más pero como ya
    también este esta esto estos estas ese esa eso hay fue era hola gracias vale bueno sí
    desde hasta entre sobre""",
    time="""año día semana semanal mes mensual hoy mañana ayer noche tarde fin_de_semana
    próximo próxima pasado pasada hora minuto vez
    empieza empiezan empezar comienza comienzan comenzar inicio después antes durante""",
    calendar="""lunes martes miércoles jueves viernes sábado domingo sábados domingos enero
    febrero marzo abril mayo junio julio agosto septiembre setiembre octubre noviembre
    diciembre""",
    people="""hijo hija hermano hermana madre padre mamá papá amigo amiga primo prima vecino
    vecina compañero compañera perro gato""",
    until="hasta",
    months="""enero febrero marzo abril mayo junio julio agosto septiembre|setiembre octubre
    noviembre diciembre""",
    weekdays="lunes martes miércoles|miercoles jueves viernes sábado|sabado domingo",
    numbers="""dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince
    dieciséis|dieciseis diecisiete dieciocho diecinueve veinte""",
    one="una",
    clock="""<a_las|las|a_la|la>_{h}_y_cuarto=15 <a_las|las|a_la|la>_{h}_y_media=30
    <a_las|las|a_la|la>_{h}_menos_cuarto=-15 {h}_en_punto=0""",
    titles="sr. sra. señor señora dr. dra.",
)

FRENCH = Words(
    first_person="""je j' moi mon ma mes me m' nous notre nos suis j'ai j'habite""",
    second_person="tu vous votre vos toi te t'",
    user="utilisateur utilisatrice",
    question="que quoi comment pourquoi quand où qui quel quelle quels combien ",
    confirmation="""réservé réservée confirmé confirmée enregistré enregistrée inscrit inscrite
    créé créée envoyé envoyée commandé commandée programmé programmée noté notée j'ai c'est_fait
    c'est_noté numéro_de référence dossier""",
    change="""maintenant désormais ne_plus changé changée nouveau nouvelle nouvel
    au_lieu_de déplacé déplacée reporté reportée déménagé déménagée passé_à passe_à à_partir_de
    mis_à_jour mise_à_jour mets_à_jour met_à_jour""",
    standing="rappelle-toi souviens-toi n'oublie_pas retiens note_que à_partir_de_maintenant",
    lasting="""allergique allergie végétarien végétarienne diabète fils fille femme mari
    conjoint chien chat maison appartement adresse loyer salaire budget anniversaire travail
    employeur entreprise patron école université examen professeur préfère déteste""",
    stopwords="""le la les l' un une des du de d' et ou en dans avec sans pour par sur que qui
    se est sont être avoir a ai ce cette ces mon ma mes ton ta tes son sa ses nous vous il elle
    ils elles ne pas plus très mais comme aussi au aux y bonjour merci oui""",
    time="""an année jour journée semaine hebdomadaire mois mensuel aujourd'hui demain hier
    soir soirée nuit matin week-end prochain prochaine dernier dernière heure minute fois
    commence commencent commencer début après avant depuis""",
    calendar="""lundi mardi mercredi jeudi vendredi samedi dimanche lundis mardis mercredis
    jeudis vendredis samedis dimanches janvier février mars avril mai juin juillet août
    septembre octobre novembre décembre""",
    people="""fils fille frère sœur mère père ami amie cousin cousine voisin voisine collègue
    chien chat""",
    until="jusqu'au jusqu'à jusqu’au jusqu’à jusqu'a",
    months="""janvier février|fevrier mars avril mai juin juillet août|aout septembre octobre
    novembre décembre|decembre""",
    weekdays="lundi mardi mercredi jeudi vendredi samedi dimanche",
    numbers="""deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze
    seize dix-sept dix-huit dix-neuf vingt""",
    one="une",
    clock="""<à|vers>_{h}_heures?_et_quart=15 <à|vers>_{h}_heures?_et_demie=30
    <à|vers>_{h}_heures?_moins_le_quart=-15""",
    titles="mme. monsieur madame",
)

GERMAN = Words(
    first_person="ich mein meine meinen meinem meiner meines mich mir wir unser unsere uns",
    second_person="dich dir dein deine deinen deinem euch euer",
    user="nutzer nutzerin benutzer benutzerin",
    question="was wie warum wann wo wer welche welcher welches wieviel kannst gibt",
    confirmation="""gebucht reserviert bestätigt angelegt erstellt registriert bestellt
    versendet verschickt eingetragen erledigt eröffnet notiert ich_habe habe_ich hab_ich
    sendungsnummer
    bestellnummer vorgangsnummer""",
    change="""jetzt nun nicht_mehr geändert gewechselt wechseln neu neue neuer neues
    stattdessen verschoben umgezogen ab_sofort seit ersetzt erhöht gesenkt erhöhen senken
    ab_nächster ab_nächste ab_nächsten ab_morgen aktualisiert""",
    standing="merk_dir vergiss_nicht denk_daran ab_jetzt zur_info",
    lasting="""allergisch allergie vegetarisch vegetarier diabetes sohn tochter frau mann
    partner partnerin hund katze wohnung adresse miete gehalt budget geburtstag arbeit firma
    chef chefin schule universität prüfung lehrer lehrerin bevorzuge hasse""",
    stopwords="""der die das den dem des ein eine einen einem einer und oder in im mit ohne für
    auf an am zu zum zur von vom ist sind war sein haben hat habe ich du er sie es wir ihr
    nicht auch aber wie so sehr noch schon nur mal dann denn doch ja nein hallo danke bitte
    bei aus nach über unter ab bis pro je wird werden kann muss soll gilt heißt""",
    time="""jahr tag woche wöchentlich monat monatlich heute morgen gestern abend nacht
    wochenende nächste nächsten nächster nächstes letzte letzten stunde minute mal beginnt
    beginnen anfang nach vor während seit""",
    calendar="""montag dienstag mittwoch donnerstag freitag samstag sonntag montags dienstags
    mittwochs donnerstags freitags samstags sonntags januar jänner februar märz april mai juni
    juli august september oktober november dezember""",
    people="""sohn tochter bruder schwester mutter vater freund freundin cousin cousine nachbar
    nachbarin kollege kollegin hund katze""",
    until="bis bis_zum bis_zur bis_am",
    months="""januar|jänner februar märz|maerz april mai juni juli august september oktober
    november dezember""",
    weekdays="montag dienstag mittwoch donnerstag freitag samstag|sonnabend sonntag",
    numbers="""zwei drei vier fünf|fuenf sechs sieben acht neun zehn elf zwölf|zwoelf dreizehn
    vierzehn fünfzehn|fuenfzehn sechzehn siebzehn achtzehn neunzehn zwanzig""",
    one="eins|ein",
    clock="""viertel_nach_{h}=15 halb_{h}=-30 viertel_vor_{h}=-15 {h}_uhr=0""",
    titles="herr frau dr. prof.",
)

PORTUGUESE = Words(
    first_person="eu meu minha meus minhas nós nosso nossa nossos nossas me tenho sou estou moro",
    second_person="você vocês tu te",
    user="usuário usuária utilizador",
    question="que como porque quando onde quem qual quanto quanta pode",
    confirmation="""reservei reservado reservada confirmado confirmada agendado agendada
    registrado registrada criado criada enviado enviada pedido número_de código_de marquei
    marcado marcada agendei inscrevi inscrito inscrita paguei pago paga enviei criei cadastrei
    registrei anotei anotado comprovante protocolo""",
    change="""agora não_mais mudou mudamos mudança novo nova em_vez_de passou_a passou_para
    passa_para trocou trocamos trocado a_partir_de atualizado atualizada""",
    standing="lembra não_esqueça a_partir_de_agora",
    lasting="""alérgico alérgica alergia vegetariano vegetariana diabetes filho filha esposa
    marido cachorro gato casa apartamento endereço aluguel salário orçamento aniversário
    trabalho empresa chefe escola universidade prova prefiro odeio""",
    stopwords="""o a os as um uma de do da dos das e ou em no na nos nas com sem por para que
    se é são ser estar mas como já também muito mais olá obrigado obrigada sim""",
    time="""ano dia semana semanal mês mensal hoje amanhã ontem noite tarde manhã
    próximo próxima passado passada hora minuto vez começa começam começar início depois
    antes durante""",
    calendar="""segunda terça quarta quinta sexta sábado domingo segundas terças quartas
    quintas sextas sábados domingos segunda-feira terça-feira quarta-feira quinta-feira
    sexta-feira segundas-feiras terças-feiras quartas-feiras quintas-feiras sextas-feiras
    janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro
    dezembro""",
    until="até",
    months="""janeiro fevereiro março|marco abril maio junho julho agosto setembro outubro
    novembro dezembro""",
    weekdays="segunda terça|terca quarta quinta sexta sábado|sabado domingo",
    numbers="""dois|duas três|tres quatro cinco seis sete oito nove dez onze doze treze
    catorze|quatorze quinze dezesseis|dezasseis dezessete|dezassete dezoito dezenove|dezanove
    vinte""",
    one="uma|um",
    clock="""<às|as|à>_{h}_e_meia=30 <às|as|à>_{h}_e_quinze=15 <às|as|à>_{h}_e_um_quarto=15
    quinze_para_as_{h}=-15 {h}_em_ponto=0""",
    titles="sr. sra. dr. dra.",
)

ITALIAN = Words(
    first_person="io mio mia miei mie noi nostro nostra nostri nostre ho sono abito",
    second_person="tu voi tuo tua tuoi tue ti vostro",
    user="utente",
    question="che cosa come perché quando dove chi quale quanto quanta puoi",
    confirmation="""prenotato prenotata confermato confermata registrato registrata creato
    creata inviato inviata ordinato ordinata fatto ho numero_di codice_di""",
    change="""ora adesso non_più cambiato cambiata nuovo nuova invece spostato spostata da_ora
    aggiornato aggiornata""",
    standing="ricorda non_dimenticare d'ora_in_poi",
    lasting="""allergico allergica allergia vegetariano vegetariana diabete figlio figlia
    moglie marito cane gatto casa appartamento indirizzo affitto stipendio budget compleanno
    lavoro azienda capo scuola università esame preferisco odio""",
    stopwords="""il lo la i gli le un uno una di del della dei delle e o in nel nella con
    senza per su che si è sono essere avere ho ha ma come già anche molto più ciao grazie sì""",
    time="""anno giorno settimana settimanale mese mensile oggi domani ieri sera notte
    mattina prossimo prossima scorso scorsa ora minuto volta inizia iniziano iniziare inizio
    dopo durante""",
    calendar="""lunedì martedì mercoledì giovedì venerdì sabato domenica sabati domeniche
    gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre
    dicembre""",
    until="fino_al fino_a fino_alla entro_il",
    months="""gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre
    novembre dicembre""",
    weekdays="""lunedì|lunedi martedì|martedi mercoledì|mercoledi giovedì|giovedi
    venerdì|venerdi sabato domenica""",
    numbers="""due tre quattro cinque sei sette otto nove dieci undici dodici tredici
    quattordici quindici sedici diciassette diciotto diciannove venti""",
    one="una|l'una",
    clock="""<alle|le>_{h}_e_un_quarto=15 <alle|le>_{h}_e_mezzo=30 <alle|le>_{h}_e_mezza=30
    <alle|le>_{h}_meno_un_quarto=-15 {h}_in_punto=0""",
    titles="signor signora dott. dottoressa",
)

DUTCH = Words(
    first_person="ik mijn m'n mij wij ons",
    second_person="jij jou jouw jullie uw",
    user="gebruiker gebruikster",
    question="wat hoe waarom wanneer waar wie welke welk hoeveel kun kunt",
    confirmation="""geboekt gereserveerd bevestigd aangemaakt geregistreerd besteld verstuurd
    verzonden ingepland genoteerd toegevoegd ingeschreven betaald geregeld gedaan
    reserveringsnummer bestelnummer ordernummer referentie kenmerk dossiernummer ticketnummer""",
    change="""nu voortaan niet_meer veranderd gewijzigd gewisseld nieuw nieuwe verplaatst
    verhuisd vervangen verhoogd verlaagd opgetrokken vanaf per_direct in_plaats_van aangepast
    bijgewerkt verschoven uitgesteld""",
    standing="onthoud vergeet_niet denk_eraan vanaf_nu ter_info",
    lasting="""allergisch allergie vegetarisch vegetariër diabetes zoon dochter echtgenoot
    echtgenote hond kat huis woning adres huur salaris verjaardag werk bedrijf baas school
    universiteit examen liever""",
    # Not words of another language or names, which a function word can never be: "door" (of
    # a house), "want", "van" (a vehicle, and "Van Nguyen"), "met", "tot", "om", "hun", "dan",
    # "ben". "onze" is eleven in French and Portuguese.
    stopwords="""ik je jij wij we mij de het een en of in op aan zonder voor naar uit bij te
    over is zijn was waren wordt worden heeft hebben heb hij zij ze dat dit deze er niet ook
    maar als nog al wel geen zo erg dus nee ja hallo bedankt graag even daar hier mijn""",
    time="""jaar dag week wekelijks maand maandelijks vandaag morgen gisteren avond nacht
    ochtend weekend volgende volgend vorige vorig uur minuut keer begint beginnen begin
    tijdens sinds""",
    calendar="""maandag dinsdag woensdag donderdag vrijdag zaterdag zondag maandags dinsdags
    woensdags donderdags vrijdags zaterdags zondags januari februari maart april mei juni juli
    augustus september oktober november december""",
    people="""zoon dochter broer zus moeder vader vriend vriendin buurman buurvrouw collega hond
    kat""",
    months="""januari februari maart april mei juni juli augustus september oktober november
    december""",
    weekdays="maandag dinsdag woensdag donderdag vrijdag zaterdag zondag",
    numbers="""twee drie vier vijf zes zeven acht negen tien elf twaalf dertien veertien
    vijftien zestien zeventien achttien negentien twintig""",
    one="een|één",
    clock="""kwart_over_{h}=15 half_{h}=-30 kwart_voor_{h}=-15""",
)

LANGUAGES: dict[str, Words] = {
    "en": ENGLISH,
    "es": SPANISH,
    "fr": FRENCH,
    "de": GERMAN,
    "pt": PORTUGUESE,
    "it": ITALIAN,
    "nl": DUTCH,
}

# Words that are function words in one language and content in another ("son" is a child in
# English): never a stop word.
_CONTENT_ELSEWHERE = frozenset({"son", "war", "die", "mein", "also", "hat", "bei", "fast"})


def _entries(text: str) -> list[str]:
    """A class's words and phrases, separated by white space; "_" joins a phrase's words."""
    return [entry.replace("_", " ") for entry in text.split()]


def numbered(field: str, first: int, *, of: Words | None = None) -> dict[str, int]:
    """Each spelling in an ordered class (`months`, `weekdays`, `numbers`) of every language,
    or of one, to its place in the order counted from `first`."""
    found: dict[str, int] = {}
    for words in [of] if of else LANGUAGES.values():
        for index, spellings in enumerate(getattr(words, field).split()):
            for spelling in spellings.split("|"):
                found.setdefault(spelling, first + index)
    return found


def words_of(field: str) -> frozenset[str]:
    """Every language's single words of one class, in lower case."""
    return frozenset(
        word
        for words in LANGUAGES.values()
        for entry in _entries(getattr(words, field))
        for word in ([entry] if " " not in entry else [])
    )


def pattern_of(
    field: str, *, excluding: frozenset[str] = frozenset(), after_elision: bool = False
) -> re.Pattern[str]:
    """One case-insensitive pattern matching any word or phrase of a class, whole; with
    `after_elision`, also after an elided article ("l'utente", "l'utilisateur")."""
    entries = sorted(
        {entry for words in LANGUAGES.values() for entry in _entries(getattr(words, field))}
        - excluding,
        key=len,
        reverse=True,
    )
    alternatives = "|".join(re.escape(entry).replace(r"\ ", r"\s+") for entry in entries)
    start = (
        r"(?:(?<![\w'’-])|(?<=\b[ld]['’])|(?<=\b[dns]ell['’])|(?<=\b[ad]all['’]))"
        if after_elision
        else r"(?<![\w'’-])"
    )
    return re.compile(rf"{start}(?:{alternatives})(?![\w'’-])", re.IGNORECASE)


FIRST_PERSON = pattern_of("first_person")
# The first person as a written memory could hold it: without chat spellings that are words
# of other languages ("im" is German for "in the"), nor French "ma": it is "but" in Italian
# ("Ma la sera niente caffeina") and "has" in Polish, Czech and Slovak ("Użytkownik ma silny
# odruch"). A French memory in the first person most often has "je", "mon" or "mes" too.
FIRST_PERSON_WRITTEN = re.compile(
    pattern_of("first_person", excluding=frozenset({"im", "ive", "id", "i", "ma"})).pattern
    # "I" in capitals: "i" is "and" or "in" in Polish, Czech and the Scandinavian languages.
    # Not Italian "I" before a plural noun ("I farmaci"), nor the letter of a form's or a
    # road's name ("I-94", "I-5").
    + r"|(?-i:\bI\b)(?![-‐]\w)(?!\s+\w*i\b)",
    re.IGNORECASE,
)
SECOND_PERSON = pattern_of("second_person")
USER = pattern_of("user", after_elision=True)
CONFIRMATION = pattern_of("confirmation")
CHANGE = pattern_of("change")
STANDING = pattern_of("standing")
TITLES = frozenset(title.rstrip(".") for title in words_of("titles"))
ABBREVIATED_TITLES = frozenset(title[:-1] for title in words_of("titles") if title.endswith("."))
LASTING = words_of("lasting")
QUESTION_STARTS = words_of("question")
CALENDAR = words_of("calendar")
PEOPLE = words_of("people")
TIME = words_of("time")
STOPWORDS = words_of("stopwords") - _CONTENT_ELSEWHERE
# Function words of languages that capitalise every noun: in their text a capital letter does
# not mark a name.
NOUN_CAPITALISING = frozenset(_entries(GERMAN.stopwords)) - {"in", "so", "an", "die"}


def addresses_someone(text: str) -> bool:
    """The text speaks to someone ("te he reservado", "on te rappelle", "you prefer"). Dutch
    "te" marks an infinitive or means "too" ("om opgehaald te worden", "te hoog"): in a text
    with a function word only Dutch has, it addresses no one."""
    said = {match.group().lower() for match in SECOND_PERSON.finditer(text)}
    if said == {"te"}:
        return not {word.lower() for word in re.findall(r"[\w']+", text)} & _ONLY_DUTCH
    return bool(said)


# Dutch function words that are no word of another covered language: they tell a Dutch text.
_ONLY_DUTCH = frozenset(
    "het een niet zijn wordt worden naar voor ook nog maar deze dit geen wel heeft hebben mijn "
    "hij zij wij daar dus".split()
)
