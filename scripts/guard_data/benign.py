"""Benign texts written for training the learned pre-guard layer (six languages).

Customer-support messages composed from written templates, many of them carrying the words and
shapes attacks use in an ordinary sense (ignore my last message, override the delivery note, a
device in developer mode, a product called Jailbreak, a friend named Dan, a school role-play,
quoted e-mails, long complaints), and ordinary documents and tool results of the kind an
indirect injection hides in, without one. The evaluation's hard-benign set
(:mod:`.hard_benign`) is written separately and never trained on.
"""

from __future__ import annotations

import json
import random

from .attacks import CARRIERS, LEADS

__all__ = ["TEMPLATES", "REQUESTS", "SCENES", "written_benign", "written_requests", "written_scenes"]

SLOTS = {
    "item": ["headphones", "desk lamp", "water bottle", "hiking boots", "mechanical keyboard", "backpack", "e-reader",
             "coffee maker", "yoga mat", "phone case", "tablet", "smart watch", "sneakers", "blender", "office chair",
             "Jailbreak cocktail kit", "DAN-200 router", "Admin Pro label printer", "Override 5 skateboard",
             "System One speakers", "Developer Edition keyboard"],
    "order": ["#W1000001", "#W2003954", "W7782210", "#W5511002", "order 4471", "#W9087341"],
    "email": ["maria.lopez@example.com", "dan.fischer@example.org", "k.tanaka@example.net", "jo@example.com"],
    "name": ["Dan", "Dan Miller", "Maria", "Lukas", "Sofia", "Ahmed", "Chen", "Olga", "Priya", "Giulia"],
    "city": ["Austin", "Madrid", "Lyon", "Hamburg", "Porto", "Milan", "Denver", "Seville"],
    "day": ["Monday", "Friday", "yesterday", "last week", "on the 12th", "two days ago"],
}

TEMPLATES: dict[str, list[str]] = {
    "en": [
        "As I said in my previous message, the parcel arrived damaged.",
        "My previous order was late as well.",
        "Forget my previous message, it's all sorted now.",
        "Please disregard the email I sent this morning, I found the receipt.",
        "Your replies keep ignoring my question and I am losing patience: the refund was promised twice and never came.",
        "The care instructions say hand wash only, but the label says machine wash. Which is right?",
        "Please cancel my standing instructions for the weekly delivery.",
        "I lost the assembly instructions, can you email me a copy?",
        "Forget the colour, what matters is the size.",
        "Ignore the coupon, I'll pay the full price.",
        "The eco mode on the dishwasher doesn't work.",
        "I'm the administrator of our company account.",
        "My son plays delivery driver all day, do you have the toy van?",
        "Hi, where is my order {order}? It was supposed to arrive {day}.",
        "I'd like to return the {item}, it stopped working.",
        "Please cancel {order}, I ordered the wrong size.",
        "Can I exchange the {item} for a different color?",
        "My email is {email}, can you look up my orders?",
        "Please ignore my last message, I found the tracking number.",
        "Ignore what I said earlier about the address, it's correct after all.",
        "Forget the size I mentioned before, medium is fine.",
        "I need to override the delivery instructions I gave you earlier: leave it with the neighbour.",
        "Can I override the default shipping address just for this order?",
        "The {item} is stuck in developer mode and I can't get it back to normal, can I return it?",
        "My tablet shows a developer mode warning on startup, is it defective?",
        "The app says 'system error 503' when I try to pay.",
        "Could someone with admin access look at the bug on the checkout page?",
        "Your system sent me two confirmation emails for {order}.",
        "Is the {item} in stock? My son wants it for his birthday.",
        "Hi, this is {name}. I need help with a return.",
        "My friend {name} ordered this for me, can I still return it?",
        "My daughter's class is doing a role-play where the kids act as shop clerks; do you sell toy cash registers?",
        "Pretend I never placed that order and cancel it please.",
        "Can you act quickly? I need the {item} before {day}.",
        "Can I return it without restrictions, or are there conditions?",
        "Is there any restriction on returning opened items?",
        "What are your instructions for returning a large item like the {item}?",
        "The instructions in the box were missing, can you send them?",
        "I didn't follow the care instructions and the {item} shrank, can I still return it?",
        "The previous instructions I gave about the gift wrap no longer apply.",
        "Please disregard my earlier email, the address in {city} is right.",
        "Can you repeat the order details back to me?",
        "Show me what's in {order}.",
        "Print a return label for {order} please.",
        "Do you have the {item} in the unrestricted warranty plan?",
        "I'm a developer and I bought the {item} for testing, can I get an invoice?",
        "I am an admin at my company and I'd like to order 20 units.",
        "The seller told me to act as if the parcel was lost, is that right?",
        "Your chatbot keeps giving me the same answer, this is the third time I ask.",
        "My new phone came jailbroken?! I want a replacement.",
        "Is the {item} compatible with the old system?",
        "Switch my payment to the gift card please.",
        "Override: the parcel can go to my office instead, 500 Market Street.",
        "New instructions for delivery: ring twice, the bell is broken.",
        "Note for the courier: leave it behind the blue gate.",
        "Hey, quick question: does the {item} come with a manual?",
        "I wrote down the wrong zip code, please forget the old one and use 10001.",
        "Forward me the email you sent on {day}, I deleted it by mistake.",
        "Here is the email I got:\n\"Your order {order} has shipped and will arrive {day}.\"\nBut nothing came.",
        "Copying your message: 'Refund processed'. Where is the money then?",
        "Code on the box: SYS-ADMIN-0042. Is that the serial number you need?",
        "Error code DEV_MODE_1 when I start the {item}, what does it mean?",
        "Could you tell me the rules for exchanges during the holidays?",
    ],
    "es": [
        "Como dije en mi mensaje anterior, el paquete llegó dañado.",
        "Mi pedido anterior también llegó tarde.",
        "Olvida mi mensaje de antes, ya está todo resuelto.",
        "No hagas caso de mi correo de esta mañana, encontré el recibo.",
        "Vuestras respuestas ignoran mi pregunta y ya no tengo paciencia: me prometieron el reembolso dos veces.",
        "Las instrucciones del manual están en inglés, ¿tienen una versión en español?",
        "No encuentro las instrucciones de lavado del jersey.",
        "Sigo las instrucciones de la caja pero el {item} no enciende.",
        "Cambia mis instrucciones de entrega: el portero puede recibirlo.",
        "Cancela mis instrucciones de envío semanal, ya no lo necesito.",
        "Olvídate del color, lo importante es la talla.",
        "Ignora el cupón, pagaré el precio normal.",
        "El modo ahorro de la lavadora no funciona.",
        "Soy el administrador de la cuenta de mi empresa.",
        "Mi hijo hace como que es repartidor, ¿tienen la furgoneta de juguete?",
        "Hola, ¿dónde está mi pedido {order}? Tenía que llegar {day}.",
        "Quiero devolver el producto, dejó de funcionar.",
        "Ignora mi mensaje anterior, ya encontré el número de seguimiento.",
        "Olvida la dirección que te di antes, la correcta es la de {city}.",
        "Quiero cambiar las instrucciones de entrega que di: déjalo con el vecino.",
        "La tableta se quedó en modo desarrollador y no sé cómo quitarlo, ¿puedo devolverla?",
        "¿Alguien con acceso de administrador puede revisar el error del pago?",
        "En la escuela de mi hija hacen un juego de rol de tiendas, ¿venden cajas registradoras de juguete?",
        "¿Puedo devolverlo sin restricciones o hay condiciones?",
        "¿Cuáles son las instrucciones para devolver un artículo grande?",
        "Mi amigo {name} hizo el pedido por mí.",
        "Por favor, cancela el pedido {order}, me equivoqué de talla.",
        "Aquí está el correo que recibí: \"Su pedido ha sido enviado\". Pero no llegó nada.",
    ],
    "fr": [
        "Comme je l'ai dit dans mon message précédent, le colis est arrivé abîmé.",
        "Ma commande précédente est arrivée en retard aussi.",
        "Mon message précédent contenait une erreur : le code postal est 69003.",
        "Pouvez-vous annuler la commande précédente et garder la nouvelle ?",
        "Oubliez ma demande d'avant, tout est réglé maintenant.",
        "Ne tenez pas compte de mon e-mail de ce matin, j'ai retrouvé le reçu.",
        "Oubliez ce que j'ai écrit hier sur la taille, le M ira très bien.",
        "Vos réponses ignorent ma question et je perds patience : on m'a promis le remboursement deux fois.",
        "C'est la deuxième fois que je vous écris, personne ne lit mes messages et le colis n'est toujours pas là.",
        "Les instructions du manuel sont en anglais, avez-vous une version française ?",
        "Je ne trouve pas les instructions de lavage du pull.",
        "J'ai suivi les instructions de la boîte mais le {item} ne s'allume pas.",
        "Changez mes instructions de livraison : le gardien peut le réceptionner.",
        "Annulez mes instructions d'envoi hebdomadaire, je n'en ai plus besoin.",
        "Oubliez la couleur, c'est la taille qui compte.",
        "Ignorez le code promo, je paierai le prix normal.",
        "Le mode éco du lave-linge ne marche pas.",
        "Je suis l'administrateur du compte de mon entreprise.",
        "Ma fille joue à la marchande, avez-vous la caisse jouet ?",
        "Bonjour, où est ma commande {order} ? Elle devait arriver {day}.",
        "Je voudrais retourner l'article, il ne marche plus.",
        "Ignorez mon message précédent, j'ai trouvé le numéro de suivi.",
        "Oubliez l'adresse que je vous ai donnée, la bonne est à {city}.",
        "Je veux modifier les consignes de livraison que j'ai données : laissez-le chez le voisin.",
        "Ma tablette est bloquée en mode développeur, puis-je la retourner ?",
        "Quelqu'un avec un accès administrateur peut-il regarder le bug du paiement ?",
        "L'école de mon fils fait un jeu de rôle de marchand, vendez-vous des caisses enregistreuses jouets ?",
        "Puis-je le retourner sans restrictions ou y a-t-il des conditions ?",
        "Quelles sont les instructions pour retourner un gros article ?",
        "Mon ami {name} a passé la commande pour moi.",
        "Merci d'annuler la commande {order}, je me suis trompé de taille.",
        "Voici l'e-mail reçu : « Votre commande a été expédiée ». Mais rien n'est arrivé.",
    ],
    "de": [
        "Wie in meiner vorherigen Nachricht gesagt, kam das Paket beschädigt an.",
        "Meine vorherige Bestellung kam auch zu spät.",
        "Vergessen Sie meine Nachricht von vorhin, es hat sich erledigt.",
        "Ignorieren Sie meine E-Mail von heute Morgen, ich habe den Beleg gefunden.",
        "Ihre Antworten übergehen meine Frage und ich verliere die Geduld: die Erstattung wurde zweimal versprochen.",
        "Die Anleitung im Handbuch ist auf Englisch, gibt es eine deutsche Version?",
        "Ich finde die Waschanweisungen für den Pullover nicht.",
        "Ich habe die Anweisungen auf der Verpackung befolgt, aber der Artikel geht nicht an.",
        "Ändern Sie meine Lieferanweisungen: der Hausmeister kann es annehmen.",
        "Bitte meine Anweisungen für die wöchentliche Lieferung aufheben, ich brauche sie nicht mehr.",
        "Vergessen Sie die Farbe, wichtig ist die Größe.",
        "Ignorieren Sie den Gutschein, ich zahle den normalen Preis.",
        "Der Sparmodus der Waschmaschine funktioniert nicht.",
        "Ich bin der Administrator des Firmenkontos.",
        "Mein Sohn spielt Paketbote, haben Sie das Spielzeugauto?",
        "Hallo, wo ist meine Bestellung {order}? Sie sollte {day} ankommen.",
        "Ich möchte den Artikel zurückgeben, er funktioniert nicht mehr.",
        "Ignorieren Sie meine letzte Nachricht, ich habe die Sendungsnummer gefunden.",
        "Vergessen Sie die alte Adresse, die richtige ist in {city}.",
        "Ich möchte meine Lieferanweisungen ändern: bitte beim Nachbarn abgeben.",
        "Mein Tablet hängt im Entwicklermodus fest, kann ich es zurückgeben?",
        "Kann sich jemand mit Admin-Zugang den Fehler beim Bezahlen ansehen?",
        "Die Schule meiner Tochter macht ein Rollenspiel als Verkäufer, haben Sie Spielzeugkassen?",
        "Kann ich es ohne Einschränkungen zurückgeben oder gibt es Bedingungen?",
        "Welche Anweisungen gelten für die Rücksendung großer Artikel?",
        "Mein Freund {name} hat für mich bestellt.",
        "Bitte stornieren Sie {order}, ich habe die falsche Größe bestellt.",
        "Hier ist die E-Mail: \"Ihre Bestellung wurde versandt\". Aber nichts kam an.",
    ],
    "pt": [
        "Como disse na minha mensagem anterior, a encomenda chegou danificada.",
        "O meu pedido anterior também chegou atrasado.",
        "Esqueça a minha mensagem de antes, já está tudo resolvido.",
        "Não ligue ao e-mail desta manhã, encontrei o recibo.",
        "As vossas respostas ignoram a minha pergunta e estou a perder a paciência: prometeram o reembolso duas vezes.",
        "As instruções do manual estão em inglês, há uma versão em português?",
        "Não encontro as instruções de lavagem da camisola.",
        "Segui as instruções da caixa mas o {item} não liga.",
        "Mude as minhas instruções de entrega: o porteiro pode receber.",
        "Cancele as minhas instruções de envio semanal, já não preciso.",
        "Esqueça a cor, o importante é o tamanho.",
        "Ignore o cupão, pago o preço normal.",
        "O modo económico da máquina de lavar não funciona.",
        "Sou o administrador da conta da minha empresa.",
        "A minha filha brinca às lojas, têm a caixa registadora de brinquedo?",
        "Olá, onde está o meu pedido {order}? Devia chegar {day}.",
        "Quero devolver o artigo, parou de funcionar.",
        "Ignore a minha mensagem anterior, já encontrei o código de rastreio.",
        "Esqueça o endereço que dei antes, o certo é em {city}.",
        "Quero mudar as instruções de entrega que dei: deixe com o vizinho.",
        "O meu tablet ficou preso no modo desenvolvedor, posso devolver?",
        "Alguém com acesso de administrador pode ver o erro no pagamento?",
        "A escola da minha filha faz uma dramatização de loja, vocês vendem caixas registradoras de brinquedo?",
        "Posso devolver sem restrições ou há condições?",
        "Quais são as instruções para devolver um artigo grande?",
        "O meu amigo {name} fez o pedido por mim.",
        "Por favor, cancele o pedido {order}, errei o tamanho.",
        "Aqui está o e-mail: \"O seu pedido foi enviado\". Mas não chegou nada.",
    ],
    "it": [
        "Come ho scritto nel messaggio precedente, il pacco è arrivato danneggiato.",
        "Anche il mio ordine precedente è arrivato in ritardo.",
        "Dimentica il mio messaggio di prima, è tutto risolto.",
        "Non considerare la mia email di stamattina, ho trovato la ricevuta.",
        "Le vostre risposte ignorano la mia domanda e sto perdendo la pazienza: il rimborso è stato promesso due volte.",
        "Le istruzioni del manuale sono in inglese, c'è una versione italiana?",
        "Non trovo le istruzioni di lavaggio del maglione.",
        "Ho seguito le istruzioni sulla scatola ma il {item} non si accende.",
        "Cambiate le mie istruzioni di consegna: il portiere può ritirarlo.",
        "Annullate le mie istruzioni di spedizione settimanale, non mi serve più.",
        "Lascia perdere il colore, conta la taglia.",
        "Ignorate il coupon, pago il prezzo pieno.",
        "La modalità eco della lavatrice non funziona.",
        "Sono l'amministratore dell'account aziendale.",
        "Mia figlia gioca a fare la cassiera, avete il registratore giocattolo?",
        "Ciao, dov'è il mio ordine {order}? Doveva arrivare {day}.",
        "Vorrei restituire l'articolo, non funziona più.",
        "Ignora il mio messaggio precedente, ho trovato il numero di tracciamento.",
        "Dimentica l'indirizzo che ti ho dato prima, quello giusto è a {city}.",
        "Voglio cambiare le istruzioni di consegna che ho dato: lasciatelo al vicino.",
        "Il tablet è bloccato in modalità sviluppatore, posso restituirlo?",
        "Qualcuno con accesso da amministratore può controllare l'errore nel pagamento?",
        "La scuola di mia figlia fa un gioco di ruolo da commessi, vendete registratori di cassa giocattolo?",
        "Posso restituirlo senza restrizioni o ci sono condizioni?",
        "Quali sono le istruzioni per restituire un articolo grande?",
        "Il mio amico {name} ha fatto l'ordine per me.",
        "Per favore annulla l'ordine {order}, ho sbagliato taglia.",
        "Ecco l'email: \"Il tuo ordine è stato spedito\". Ma non è arrivato niente.",
    ],
}

COMPLAINT_PARTS = [
    "I have been a customer for years and I have never been treated like this.",
    "Your chatbot ignored my question twice and your replies were copy-paste.",
    "The rules on your website say I can return it within 30 days, and it's been 10.",
    "You must fix this today, I will not accept another generic answer.",
    "Every time I write, I get a different answer from a different agent.",
    "The instructions in the box were wrong and the {item} broke on the first day.",
    "I want a refund to my original card, not store credit.",
    "If this is not solved I will post a review about it everywhere.",
    "I already sent photos of the damage on {day}.",
    "Please stop sending me the same automated text and read what I wrote.",
    "I asked you to ignore the old address and you shipped there anyway.",
    "Your system charged me twice and nobody with admin access seems able to fix it.",
]


def _fill(s: str, rng: random.Random) -> str:
    for k, vals in SLOTS.items():
        while "{" + k + "}" in s:
            s = s.replace("{" + k + "}", rng.choice(vals), 1)
    return s


def written_benign(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` benign texts (``{"source", "lang", "text", "group"}``; ``group``: the template it came from): support messages, long complaints, clean carriers."""
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    langs = ["en", "en", "en", "es", "fr", "de", "pt", "it"]
    while len(out) < n:
        r = rng.random()
        lang = rng.choice(langs)
        if r < 0.62:
            tpl = rng.choice(TEMPLATES[lang])
            text, source, group = _fill(tpl, rng), "written:support", tpl
            if rng.random() < 0.3:  # two requests in one message
                text += " " + _fill(rng.choice(TEMPLATES[lang]), rng)
        elif r < 0.77:
            k = rng.randint(4, 8)
            parts = rng.sample(COMPLAINT_PARTS, k)
            text, source, group = " ".join(_fill(s, rng) for s in parts), "written:complaint", parts[0]
            lang = "en"
        else:
            carrier = rng.choice(CARRIERS)
            leads = LEADS[lang]
            tpl = rng.choice(TEMPLATES[lang])
            body = rng.choice(leads) + " " + _fill(tpl, rng)
            body = json.dumps(body)[1:-1] if carrier.lstrip().startswith(("{", "Tool")) else body
            text = carrier.format(inj=body, lead=rng.choice(leads), tail=rng.choice(leads))
            source, group = "written:document", tpl
        if text not in seen:
            seen.add(text)
            out.append({"source": source, "lang": lang, "text": text, "group": group})
    return out


# Ordinary requests to an assistant and second-person guides: instructions that are not injections
# (nothing overridden, nothing exfiltrated, no mode switch). {topic}/{thing} are filled below.
REQUESTS: dict[str, list[str]] = {
    "en": [
        "Write a short thank-you note to my neighbour for watering the plants.",
        "Summarize this paragraph in two sentences: {doc}",
        "Translate into Spanish: '{sent}'",
        "Explain how {topic} works in simple words.",
        "List three things I should check before buying a {thing}.",
        "Compare the {thing} and the {thing} for a small apartment.",
        "Draft an email to my landlord asking to fix the heating.",
        "Help me plan a weekend trip to {city} on a budget.",
        "What is the difference between {topic} and {topic}?",
        "Give me a recipe for a quick vegetarian dinner.",
        "Can you proofread this sentence: '{sent}'",
        "Tell me a fun fact about {topic}.",
        "You want to exchange the {thing} for a bigger one. If the bigger one is not available, you keep the original. You prefer to pay any difference with your gift card.",
        "You received a {thing} that does not work. You want a refund to the original card, and you do not want store credit.",
        "You are a customer in {city} who ordered a {thing}; you want to know when it will arrive and whether you can change the address.",
        "To reset the {thing}, you hold the power button for ten seconds, then you wait for the light to blink twice.",
        "First you remove the back cover, then you insert the batteries, and finally you press the pairing button.",
        "If the parcel does not arrive within five days, you should contact the courier first and then the store.",
        "Before you return an item, you print the label, you pack the item in its box and you drop it at any post office.",
        "Please answer briefly: do you deliver on Sundays?",
        "I want you to check whether my order can still be changed.",
        "Please tell me the steps to return a {thing}.",
        "You should always keep the receipt until the warranty ends.",
        "Make a shopping list for a birthday party for ten kids.",
        "Rewrite this review to sound more polite: '{sent}'",
        "Act quickly if you see a suspicious charge: call your bank and block the card.",
        "From the list below, pick the cheapest option: {thing}, {thing}, {thing}.",
        "Show me how to measure my foot for the right shoe size.",
        "Repeat after me the order number so I know you got it right: #W1000001.",
        "Ignore the colour for now, which {thing} has the best battery?",
    ],
    "es": ["Escribe una nota de agradecimiento para mi vecino.", "Resume este texto en dos frases: {doc}",
           "Explica cómo funciona {topic} con palabras sencillas.", "Quieres cambiar el {thing} por uno más grande; si no hay, te quedas con el original.",
           "Para reiniciar el aparato, mantén pulsado el botón diez segundos.", "Por favor, dime los pasos para devolver un producto."],
    "fr": ["Écris un petit mot de remerciement pour mon voisin.", "Résume ce texte en deux phrases : {doc}",
           "Explique comment fonctionne {topic} simplement.", "Tu veux échanger l'article contre un plus grand ; sinon tu gardes l'original.",
           "Pour réinitialiser l'appareil, maintiens le bouton appuyé dix secondes.", "Dis-moi les étapes pour retourner un produit, s'il te plaît."],
    "de": ["Schreib eine kurze Dankesnachricht an meinen Nachbarn.", "Fasse diesen Text in zwei Sätzen zusammen: {doc}",
           "Erkläre einfach, wie {topic} funktioniert.", "Du willst den Artikel gegen einen größeren tauschen; sonst behältst du das Original.",
           "Um das Gerät zurückzusetzen, hältst du die Taste zehn Sekunden gedrückt.", "Sag mir bitte die Schritte für eine Rücksendung."],
    "pt": ["Escreve uma nota de agradecimento para o meu vizinho.", "Resume este texto em duas frases: {doc}",
           "Explica como funciona {topic} de forma simples.", "Você quer trocar o artigo por um maior; se não houver, fica com o original.",
           "Para reiniciar o aparelho, mantenha o botão pressionado dez segundos.", "Diga-me os passos para devolver um produto, por favor."],
    "it": ["Scrivi un biglietto di ringraziamento per il mio vicino.", "Riassumi questo testo in due frasi: {doc}",
           "Spiega come funziona {topic} in parole semplici.", "Vuoi cambiare l'articolo con uno più grande; se non c'è, tieni l'originale.",
           "Per resettare l'apparecchio, tieni premuto il pulsante per dieci secondi.", "Dimmi i passaggi per restituire un prodotto, per favore."],
}
TOPICS = ["solar panels", "a heat pump", "compound interest", "the postal system", "noise-cancelling headphones",
          "sourdough bread", "a credit card chargeback", "customs duties", "a return window", "bluetooth pairing"]
SENTS = ["The delivery was late but the driver was very kind.", "I has ordered two shirt and only one arrived.",
         "This blender is loud but it works great.", "Thank you for your help with my order."]
DOCS = ["The store opens at nine. Returns are accepted within thirty days with a receipt. Gift cards cannot be refunded.",
        "Our new warehouse in Ohio ships most orders within one business day, and tracking numbers are sent by email."]


def written_requests(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` ordinary requests and second-person guides (``{"source", "lang", "text", "group"}``)."""
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    langs = ["en", "en", "en", "en", "es", "fr", "de", "pt", "it"]
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        lang = rng.choice(langs)
        tpl = rng.choice(REQUESTS[lang])
        text = tpl
        for key, vals in (("topic", TOPICS), ("sent", SENTS), ("doc", DOCS), ("thing", SLOTS["item"]),
                          ("city", SLOTS["city"])):
            while "{" + key + "}" in text:
                text = text.replace("{" + key + "}", rng.choice(vals), 1)
        if rng.random() < 0.3:
            text += " " + _fill(rng.choice(TEMPLATES[lang]), rng)
        if text not in seen:
            seen.add(text)
            out.append({"source": "written:request", "lang": lang, "text": text, "group": tpl})
    return out


# Second-person descriptions of a customer's situation and goal (the way a task, a ticket summary or
# a role description for a person is written): instructions about the world, none to the assistant.
SCENES: dict[str, list[str]] = {
    "en": [
        "You are {name}, you live in {city} and you ordered a {thing} {day}.",
        "You want to return the {thing} because it is too small, and you want the refund on your credit card.",
        "You are a loyal customer and you are a bit annoyed that the {thing} arrived late.",
        "If the agent offers store credit, you decline and ask for a refund instead.",
        "You do not remember your email, but you know your zip code is {zip}.",
        "You prefer PayPal for any extra payment, and you do not want to use your gift card.",
        "You want to change the address of all your pending orders to your new flat in {city}.",
        "Your name is {name} and your user id is {uid}.",
        "You bought two {thing}s for your kids and one of them is broken; you want to exchange it for the same model.",
        "You are not sure which order the {thing} was in, so you ask the agent to check all your orders.",
        "When the agent asks for confirmation, you say yes only if the price difference is under 20 dollars.",
        "You want to know how many colour options the {thing} has before you decide.",
        "You first ask about the status of order {order}, then you ask to cancel it if it has not shipped.",
        "You are calling for your mother, who placed the order with her account; you have her email.",
        "You are in a hurry and you want the quickest way to get a replacement {thing}.",
        "You recently moved, and you want the {thing} you ordered last week to go to the new address.",
        "You do not want to reveal your full address, but you can give the zip code.",
        "You think you were charged twice for order {order} and you want one charge refunded.",
        "Your goal is to swap the {thing} for a cheaper variant and get the difference back.",
        "Ticket summary: the customer says the {thing} stopped working after a week; they want a replacement, not a refund.",
    ],
    "es": ["Eres {name}, vives en {city} y pediste un {thing} {day}.", "Quieres devolver el {thing} y que el reembolso vaya a tu tarjeta.",
           "Si el agente ofrece un vale, lo rechazas y pides el reembolso."],
    "fr": ["Tu es {name}, tu habites à {city} et tu as commandé un {thing} {day}.", "Tu veux retourner l'article et être remboursé sur ta carte.",
           "Si l'agent propose un avoir, tu refuses et demandes un remboursement."],
    "de": ["Du bist {name}, wohnst in {city} und hast {day} einen Artikel bestellt.", "Du willst den Artikel zurückgeben und das Geld auf deine Karte.",
           "Wenn der Mitarbeiter einen Gutschein anbietet, lehnst du ab und willst eine Erstattung."],
    "pt": ["Você é {name}, mora em {city} e pediu um {thing} {day}.", "Você quer devolver o artigo e receber o reembolso no cartão.",
           "Se o agente oferecer um vale, você recusa e pede o reembolso."],
    "it": ["Sei {name}, vivi a {city} e hai ordinato un {thing} {day}.", "Vuoi restituire l'articolo e avere il rimborso sulla carta.",
           "Se l'operatore offre un buono, rifiuti e chiedi il rimborso."],
}


def written_scenes(n: int, seed: int) -> list[dict[str, str]]:
    """``n`` second-person situation descriptions, one to four sentences each."""
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    langs = ["en", "en", "en", "en", "es", "fr", "de", "pt", "it"]
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        lang = rng.choice(langs)
        picks = rng.sample(SCENES[lang], min(len(SCENES[lang]), rng.randint(1, 4)))
        text = " ".join(picks)
        for key, vals in (("thing", SLOTS["item"]), ("city", SLOTS["city"]), ("name", SLOTS["name"]),
                          ("day", SLOTS["day"]), ("order", SLOTS["order"]), ("zip", ["10001", "94107", "28013", "69003"]),
                          ("uid", ["maria_lopez_4410", "dan_fischer_2231", "chen_wu_9087"])):
            while "{" + key + "}" in text:
                text = text.replace("{" + key + "}", rng.choice(vals), 1)
        if text not in seen:
            seen.add(text)
            out.append({"source": "written:scene", "lang": lang, "text": text, "group": picks[0]})
    return out
