"""Benign training text: customers asking about product details, manuals, settings and delivery notes.

In every language a customer writes about the *instructions* in the box, the *system* requirements of a
device, an *eco mode* or an *airplane mode*, the *rules* for returns, the notes for the courier — the
words attacks use, in their ordinary sense. The learned layer read such messages in Spanish, French,
German, Portuguese and Italian as attacks more often than in English (the written training text had few
of them); these parts fill that gap. Composed from parts (a frame with a subject, a request), six
languages; written apart from the bench's hard-benign sets (``hard_benign.py``, ``fresh_benign.py``),
which are never trained on. Dutch has no parts on purpose: the bench measures what carries over.
"""

from __future__ import annotations

import random

__all__ = ["DETAILS", "written_details"]

#: Per language: subjects (with their article), frames ({s} is a subject) and requests ({order} an order id).
DETAILS: dict[str, dict[str, list[str]]] = {
    "en": {
        "s": ["the assembly instructions", "the washing instructions for the wool coat", "the system requirements of the scanner",
              "the eco mode of the dryer", "the night mode of the baby monitor", "the return rules for opened items",
              "the delivery notes I left for the courier", "the locking system of the suitcase", "the user manual",
              "the airplane mode of the e-reader", "the pairing mode of the earbuds", "the quiet mode of the fan"],
        "f": ["I can't find {s} anywhere.", "I have a question about {s}.", "There was nothing in the box about {s}.",
              "I read {s} twice and I'm still lost.", "Where can I look up {s}?", "Something seems off with {s}."],
        "r": ["Can you help?", "Could you email them to me?", "Can I return it if I can't get it to work?",
              "My order is {order}.", "Is there a PDF version?", "Thanks in advance.", "Is that covered by the warranty?", ""],
    },
    "es": {
        "s": ["las instrucciones de montaje", "las instrucciones de lavado del abrigo", "los requisitos del sistema del escáner",
              "el modo eco de la secadora", "el modo noche del vigilabebés", "las normas de devolución de artículos abiertos",
              "las indicaciones de entrega que dejé para el repartidor", "el sistema de cierre de la maleta",
              "el manual de instrucciones", "el modo avión del lector electrónico", "el modo de emparejamiento de los cascos",
              "el modo silencioso del ventilador"],
        "f": ["No encuentro {s} por ningún lado.", "Tengo una duda con {s}.", "En la caja no venía nada sobre {s}.",
              "He leído {s} dos veces y sigo perdida.", "¿Dónde puedo consultar {s}?", "Creo que algo falla con {s}."],
        "r": ["¿Me ayudáis?", "¿Me lo podéis mandar por correo?", "¿Puedo devolverlo si no consigo que funcione?",
              "Mi pedido es el {order}.", "¿Hay una versión en PDF?", "Gracias de antemano.", "¿Lo cubre la garantía?", ""],
    },
    "fr": {
        "s": ["la notice de montage", "les instructions de lavage du manteau", "la configuration système requise pour le scanner",
              "le mode éco du sèche-linge", "le mode nuit du babyphone", "les règles de retour des articles ouverts",
              "les consignes de livraison que j'ai laissées au livreur", "le système de fermeture de la valise",
              "le mode d'emploi", "le mode avion de la liseuse", "le mode appairage des écouteurs", "le mode silencieux du ventilateur"],
        "f": ["Je ne trouve {s} nulle part.", "J'ai une question sur {s}.", "Il n'y avait rien dans le carton sur {s}.",
              "J'ai lu {s} deux fois et je suis toujours perdu.", "Où puis-je consulter {s} ?", "Quelque chose cloche avec {s}."],
        "r": ["Vous pouvez m'aider ?", "Vous pouvez me l'envoyer par mail ?", "Je peux le renvoyer si je n'y arrive pas ?",
              "Ma commande est la {order}.", "Il existe une version PDF ?", "Merci d'avance.", "La garantie couvre ça ?", ""],
    },
    "de": {
        "s": ["die Aufbauanleitung", "die Waschanleitung für den Wollmantel", "die Systemanforderungen des Scanners",
              "den Eco-Modus des Trockners", "den Nachtmodus des Babyphones", "die Rückgaberegeln für geöffnete Artikel",
              "die Lieferhinweise, die ich für den Boten hinterlassen habe", "das Schließsystem des Koffers",
              "die Bedienungsanleitung", "den Flugmodus des E-Readers", "den Kopplungsmodus der Ohrhörer",
              "den Leisemodus des Ventilators"],
        "f": ["Ich finde {s} nirgends.", "Könnten Sie mir {s} erklären?", "Im Karton stand nichts über {s}.",
              "Ich habe {s} zweimal gelesen und verstehe es immer noch nicht.", "Wo kann ich {s} nachlesen?",
              "Ich verstehe {s} nicht ganz."],
        "r": ["Können Sie helfen?", "Können Sie mir das per Mail schicken?", "Kann ich es zurückgeben, wenn es nicht klappt?",
              "Meine Bestellung ist {order}.", "Gibt es eine PDF-Version?", "Danke im Voraus.", "Greift da die Garantie?", ""],
    },
    "pt": {
        "s": ["as instruções de montagem", "as instruções de lavagem do casaco", "os requisitos de sistema do scanner",
              "o modo eco da máquina de secar", "o modo noturno do intercomunicador do bebé", "as regras de devolução de artigos abertos",
              "as indicações de entrega que deixei ao estafeta", "o sistema de fecho da mala", "o manual de instruções",
              "o modo de voo do leitor de livros", "o modo de emparelhamento dos auriculares", "o modo silencioso da ventoinha"],
        "f": ["Não encontro {s} em lado nenhum.", "Tenho uma dúvida sobre {s}.", "Na caixa não vinha nada sobre {s}.",
              "Li {s} duas vezes e continuo sem perceber.", "Onde posso consultar {s}?", "Acho que há algo errado com {s}."],
        "r": ["Podem ajudar?", "Podem mandar-me por e-mail?", "Posso devolver se não conseguir pôr a funcionar?",
              "A minha encomenda é a {order}.", "Há versão em PDF?", "Obrigada desde já.", "Isso está na garantia?", ""],
    },
    "it": {
        "s": ["le istruzioni di montaggio", "le istruzioni di lavaggio del cappotto", "i requisiti di sistema dello scanner",
              "la modalità eco dell'asciugatrice", "la modalità notte del baby monitor", "le regole di reso per gli articoli aperti",
              "le indicazioni di consegna che ho lasciato al corriere", "il sistema di chiusura della valigia",
              "il manuale di istruzioni", "la modalità aereo dell'e-reader", "la modalità di associazione degli auricolari",
              "la modalità silenziosa del ventilatore"],
        "f": ["Non trovo {s} da nessuna parte.", "Potete spiegarmi {s}?", "Nella scatola mancava qualcosa: cercavo {s}.",
              "Ho letto {s} due volte e non ho ancora capito.", "Dove posso consultare {s}?", "Non capisco bene {s}."],
        "r": ["Potete aiutarmi?", "Me le potete mandare per email?", "Posso restituirlo se non riesco a farlo funzionare?",
              "Il mio ordine è {order}.", "C'è una versione in PDF?", "Grazie in anticipo.", "È coperto dalla garanzia?", ""],
    },
}

_ORDERS = ["#W1000001", "#W2003954", "#W5511002", "#W9087341", "W7782210"]


def written_details(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` benign messages (``{"source", "lang", "text", "group"}``; ``group``: language and subject, so the
    validation split never holds a subject the training part saw in the same language)."""
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    langs = ["en", "es", "fr", "de", "pt", "it"]
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        lang = rng.choice(langs)
        parts = DETAILS[lang]
        subject = rng.choice(parts["s"])
        frame = rng.choice(parts["f"]).format(s=subject)
        text = (frame[0].upper() + frame[1:] + " " + rng.choice(parts["r"]).format(order=rng.choice(_ORDERS))).strip()
        if text not in seen:
            seen.add(text)
            out.append({"source": "written:details", "lang": lang, "text": text, "group": f"{lang}:{subject}"})
    return out
