"""The ``tau:Retail`` task catalog: 37 authored customer-service tasks, their scripts and graders.

A `RetailTask` gives the user simulator a goal (``instructions`` for an `LLMUser`, a
`UserScript` for a `ScriptedUser`) and states what a correct conversation leaves behind:
the write ``actions`` (tool calls on the seed database, replayed to build the expected
final database), the ``outputs`` the assistant must say, and whether it must transfer to a
human. Each task also carries a **near miss**: other actions (or outputs) that a careless
assistant would plausibly produce. `reference_script` turns either into a scripted
assistant; tests prove every reference passes and every near miss fails.

``base`` tasks (``tau:Retail-v0``) hold one request whose details the user gives up front;
``hard`` tasks (``tau:Retail-v0-hard``) hold two requests, a request the policy forbids, a
fallback the user reveals only when the first choice fails, or a question to answer.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from gem_core.envs.tau.data import USERS
from gem_core.multiagent.users import UserScript

__all__ = [
    "RetailTask",
    "TASKS",
    "TASK_NAMES",
    "LEVELS",
    "tool_call",
    "reference_script",
    "Action",
]

Action = tuple[str, dict[str, Any]]
"""A tool call: ``(tool name, arguments)``."""
LEVELS = ("base", "hard")
_USERS = {u[0]: u for u in USERS}

# Keywords the scripted user listens for (lower-case substrings of the assistant's message).
_REASON = ("reason", "why do you")
_PAY = ("payment method", "which card", "refund to", "refunded to", "pay the", "pay for", "charge", "price difference")
_ADDRESS = ("new address", "which address", "the address", "what address")


@dataclass(frozen=True)
class RetailTask:
    """One authored task.

    Attributes:
        name: the task's name (``reset(options={"task": name})``).
        level: ``"base"`` or ``"hard"``.
        user_id: the customer (a row of ``users``).
        auth: how the customer identifies: ``"email"`` or ``"name_zip"`` (forgot the email).
        goal: the customer's goal, in prose (second person).
        script: what a `ScriptedUser` says.
        actions: the write tool calls a correct conversation makes (and a transfer, if due).
        near_miss: a plausible wrong set of calls.
        outputs: what the assistant must tell the user (numbers as ``"37.00"``).
        near_miss_outputs: what the near miss says instead.
        reads: look-ups the reference solution makes first (for realism; not graded).
    """

    name: str
    level: str
    user_id: str
    auth: str
    goal: str
    script: UserScript
    actions: tuple[Action, ...]
    near_miss: tuple[Action, ...]
    outputs: tuple[str, ...] = ()
    near_miss_outputs: tuple[str, ...] = ()
    reads: tuple[Action, ...] = field(default=())

    @property
    def transfer(self) -> bool:
        """Whether a correct conversation ends with a transfer to a human agent."""
        return any(name == "transfer_to_human_agents" for name, _ in self.actions)

    @property
    def writes(self) -> tuple[Action, ...]:
        """The database-changing actions (what builds the expected final state)."""
        return tuple(a for a in self.actions if a[0] != "transfer_to_human_agents")

    @property
    def instructions(self) -> str:
        """The `LLMUser`'s instructions: who the customer is, the goal, the hidden facts."""
        _, first, last, email, _, _, _, zip_code = _USERS[self.user_id]
        if self.auth == "email":
            who = f"You are {first} {last}; your email is {email}."
        else:
            who = (
                f"You are {first} {last}; your zip code is {zip_code}. You do not remember the "
                "email of your account."
            )
        facts = "\n".join(f"- {reply}" for _, reply in self.script.facts)
        later = "\n".join(f"- {text}" for text in self.script.followups)
        parts = [who, f"Goal: {self.goal}", f"Start with a message like: {self.script.opening!r}"]
        if facts:
            parts.append(f"Facts to give only when asked:\n{facts}")
        if later:
            parts.append(f"Once that is handled, you also ask, one at a time:\n{later}")
        parts.append("Confirm a proposed action only if it matches your goal exactly.")
        return "\n".join(parts)


def tool_call(name: str, /, **arguments: Any) -> str:
    """The assistant action calling tool ``name`` (the JSON tool-call format)."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _identity_facts(user_id: str, auth: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    _, first, last, email, _, _, _, zip_code = _USERS[user_id]
    name_zip = f"I'm {first} {last}, zip code {zip_code}."
    if auth == "email":
        return ((("email",), f"My email is {email}."), (("zip code", "your name", "last name"), name_zip))
    return ((("email",), f"I don't remember my email. {name_zip}"), (("zip code", "your name", "last name"), name_zip))


def _task(
    name: str,
    level: str,
    user_id: str,
    auth: str,
    goal: str,
    opening: str,
    actions: tuple[Action, ...],
    near_miss: tuple[Action, ...],
    *,
    facts: tuple[tuple[tuple[str, ...], str], ...] = (),
    followups: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    near_miss_outputs: tuple[str, ...] = (),
    reads: tuple[Action, ...] = (),
) -> RetailTask:
    script = UserScript(
        opening=opening, facts=_identity_facts(user_id, auth) + facts, followups=followups
    )
    return RetailTask(
        name, level, user_id, auth, goal, script, actions, near_miss, outputs, near_miss_outputs, reads
    )


def _cancel(order_id: str, reason: str) -> Action:
    return ("cancel_pending_order", {"order_id": order_id, "reason": reason})


def _return(order_id: str, items: list[str], pm: str) -> Action:
    return ("return_delivered_order_items", {"order_id": order_id, "item_ids": items, "payment_method_id": pm})


def _exchange(order_id: str, items: list[str], new: list[str], pm: str) -> Action:
    return (
        "exchange_delivered_order_items",
        {"order_id": order_id, "item_ids": items, "new_item_ids": new, "payment_method_id": pm},
    )


def _modify_items(order_id: str, items: list[str], new: list[str], pm: str) -> Action:
    return (
        "modify_pending_order_items",
        {"order_id": order_id, "item_ids": items, "new_item_ids": new, "payment_method_id": pm},
    )


def _order_address(order_id: str, address1: str, city: str, state: str, zip_code: str) -> Action:
    return (
        "modify_pending_order_address",
        {"order_id": order_id, "address1": address1, "city": city, "state": state, "zip": zip_code},
    )


def _user_address(user_id: str, address1: str, city: str, state: str, zip_code: str) -> Action:
    return (
        "modify_user_address",
        {"user_id": user_id, "address1": address1, "city": city, "state": state, "zip": zip_code},
    )


def _transfer(summary: str) -> Action:
    return ("transfer_to_human_agents", {"summary": summary})


def _order(order_id: str) -> Action:
    return ("get_order_details", {"order_id": order_id})


def _user(user_id: str) -> Action:
    return ("get_user_details", {"user_id": user_id})


_NL = "no longer needed"
_MISTAKE = "ordered by mistake"

_CATALOG: tuple[RetailTask, ...] = (
    # --- base: one request, details up front -------------------------------------------
    _task("CancelHeadphones", "base", "U01", "email",
          "Cancel your pending order #R1002 (wireless headphones): you no longer need them.",
          "Hi, I want to cancel my order #R1002, the headphones.",
          (_cancel("#R1002", _NL),), (_cancel("#R1002", _MISTAKE),),
          facts=((_REASON, "I don't need them anymore."),)),
    _task("CancelMistakeOrder", "base", "U02", "name_zip",
          "Cancel your pending order #R1004: you placed it by mistake.",
          "Hello, I placed order #R1004 by mistake and would like to cancel it.",
          (_cancel("#R1004", _MISTAKE),), (_cancel("#R1004", _NL),),
          facts=((_REASON, "I ordered it by mistake."),)),
    _task("ChangeOrderAddress", "base", "U03", "email",
          "Ship your pending order #R1008 to 900 Congress Ave, Austin, TX 78701. Only this "
          "order: your account's default address stays as it is.",
          "Hi! Can you change the shipping address of my order #R1008?",
          (_order_address("#R1008", "900 Congress Ave", "Austin", "TX", "78701"),),
          (_user_address("U03", "900 Congress Ave", "Austin", "TX", "78701"),),
          facts=((("default address", "account address", "profile"), "No, only the order's address."),
                 (_ADDRESS, "The new address is 900 Congress Ave, Austin, TX 78701."))),
    _task("ReturnHeadphonesToCard", "base", "U04", "email",
          "Return the white headphones of delivered order #R1010, refunded to your Amex card.",
          "I'd like to return the white headphones from order #R1010.",
          (_return("#R1010", ["3002"], "PM07"),), (_return("#R1010", ["3002"], "PM06"),),
          facts=((_PAY + ("refund",), "Please refund it to my Amex card."),), reads=(_order("#R1010"),)),
    _task("ExchangeSneakerSize", "base", "U05", "email",
          "Exchange the size 9 blue sneakers of order #R1011 for size 10 in the same color; "
          "any difference goes to your PayPal.",
          "Hi, the sneakers from order #R1011 are too small. I'd like to exchange them for size 10 in the same color.",
          (_exchange("#R1011", ["6001"], ["6002"], "PM08"),), (_exchange("#R1011", ["6001"], ["6003"], "PM08"),),
          facts=((_PAY, "Use my PayPal account."),), reads=(("get_product_details", {"product_id": "P6"}),)),
    _task("SmallerWatch", "base", "U06", "email",
          "In pending order #R1013, change the smart watch to the 40mm size with the same "
          "silicone strap; the price difference goes to your gift card.",
          "Hello, I want to change the smart watch in my pending order #R1013 to the 40mm size, same silicone strap.",
          (_modify_items("#R1013", ["8002"], ["8001"], "PM10"),), (_modify_items("#R1013", ["8002"], ["8001"], "PM09"),),
          facts=((_PAY + ("refund",), "Put the price difference on my gift card."),)),
    _task("ReturnHeadphones", "base", "U07", "email",
          "Return the headphones of delivered order #R1016 for a refund to your Mastercard "
          "(no exchange).",
          "Hi, I want to return the headphones from order #R1016 for a refund.",
          (_return("#R1016", ["3003"], "PM11"),), (_exchange("#R1016", ["3003"], ["3001"], "PM11"),),
          facts=((_PAY + ("refund",), "Refund my Mastercard please."),)),
    _task("CancelMug", "base", "U08", "name_zip",
          "Cancel your pending order #R1018 (a mug): you no longer need it.",
          "Hi, please cancel order #R1018, I don't need the mug anymore.",
          (_cancel("#R1018", _NL),), (_cancel("#R1018", _MISTAKE),),
          facts=((_REASON, "I no longer need it."),)),
    _task("UpdateAccountAddress", "base", "U09", "email",
          "Change your account's default address to 15 Music Row, Nashville, TN 37203. Your "
          "pending order stays as it is.",
          "Hi, I moved. Can you update the address on my account?",
          (_user_address("U09", "15 Music Row", "Nashville", "TN", "37203"),),
          (_order_address("#R1021", "15 Music Row", "Nashville", "TN", "37203"),),
          facts=((("pending order", "order as well", "orders too", "your order"), "No, just my account address."),
                 (_ADDRESS, "It's 15 Music Row, Nashville, TN 37203."))),
    _task("CancelHeadphonesPaypal", "base", "U10", "email",
          "Cancel your pending headphones order #R1022: you no longer need it.",
          "I want to cancel the headphones order #R1022.",
          (_cancel("#R1022", _NL),), (_cancel("#R1022", _MISTAKE),),
          facts=((_REASON, "I found them cheaper elsewhere, so I no longer need them."),)),
    _task("BiggerBackpack", "base", "U11", "email",
          "In pending order #R1025, take the 40L backpack instead of the 30L; pay with your gift card.",
          "Hi, for my pending order #R1025 I'd rather have the 40L backpack instead of the 30L.",
          (_modify_items("#R1025", ["4002"], ["4004"], "PM17"),), (_modify_items("#R1025", ["4002"], ["4001"], "PM17"),),
          facts=((_PAY, "Use my gift card."), (("color",), "Whatever color the 40L comes in is fine."))),
    _task("ReturnSneakers", "base", "U12", "email",
          "Return the sneakers of delivered order #R1027 for a refund to your Visa card.",
          "Hi, I'd like to return the sneakers from my order #R1027.",
          (_return("#R1027", ["6002"], "PM18"),), (_exchange("#R1027", ["6002"], ["6003"], "PM18"),),
          facts=((_PAY + ("refund",), "Back to my Visa card, please."),)),
    _task("OrderTotal", "base", "U01", "email",
          "Find out how much you paid in total for order #R1001. Change nothing.",
          "Hi, how much did I pay in total for order #R1001?",
          (), (), outputs=("37.00",), near_miss_outputs=("25.00",), reads=(_order("#R1001"),)),
    _task("OrderStatus", "base", "U03", "email",
          "Find out the status of your order #R1007. Change nothing.",
          "What's the status of my order #R1007?",
          (), (), outputs=("cancelled",), near_miss_outputs=("pending",), reads=(_order("#R1007"),)),
    _task("CannotCancelDelivered", "base", "U02", "name_zip",
          "You want to cancel order #R1005 (a backpack). If it cannot be cancelled, you do not "
          "want a return or an exchange: end the conversation.",
          "I want to cancel my order #R1005.",
          (), (_return("#R1005", ["4002"], "PM04"),),
          facts=((("return", "exchange"), "No, I don't want to return it. Never mind then."),
                 (_REASON, "I just don't need it anymore.")), reads=(_order("#R1005"),)),
    _task("FixOrderAddress", "base", "U05", "email",
          "Correct the shipping address of pending order #R1012 to 48 Lake Rd, Madison, WI 53703.",
          "I need to fix the address on my pending order #R1012: it should be 48 Lake Rd, not 47.",
          (_order_address("#R1012", "48 Lake Rd", "Madison", "WI", "53703"),),
          (_order_address("#R1012", "48 Lake Rd", "Madison", "WI", "53704"),),
          facts=((_ADDRESS + ("city", "zip"), "48 Lake Rd, Madison, WI 53703."),)),
    _task("ReturnBothLamps", "base", "U06", "email",
          "Return both desk lamps of delivered order #R1014, refunded to your Visa card.",
          "I'd like to return both desk lamps from order #R1014.",
          (_return("#R1014", ["5003", "5003"], "PM09"),), (_return("#R1014", ["5003"], "PM09"),),
          facts=((_PAY + ("refund",), "Refund to my Visa card."),)),
    _task("SwapShirt", "base", "U07", "email",
          "In pending order #R1017, change the white T-shirt to a black one in size L; the "
          "difference goes to your Mastercard.",
          "In my pending order #R1017, please change the white T-shirt to a black one in size L.",
          (_modify_items("#R1017", ["1003"], ["1002"], "PM11"),), (_modify_items("#R1017", ["1001"], ["1002"], "PM11"),),
          facts=((_PAY, "Charge the difference to my Mastercard."),)),
    _task("ExchangeKettle", "base", "U09", "email",
          "Exchange the glass kettle of delivered order #R1020 for the steel one; the "
          "difference goes to your Visa.",
          "Hi, I'd like to exchange the glass kettle from order #R1020 for the steel one.",
          (_exchange("#R1020", ["7003"], ["7002"], "PM14"),), (_exchange("#R1020", ["7003"], ["7001"], "PM14"),),
          facts=((_PAY + ("refund",), "Refund the difference to my Visa."),)),
    _task("ReturnLargeMug", "base", "U10", "email",
          "Return the 500ml mug (not the 350ml one) of delivered order #R1023, refunded to your Visa.",
          "I want to return the 500ml mug from order #R1023.",
          (_return("#R1023", ["2003"], "PM15"),), (_return("#R1023", ["2002"], "PM15"),),
          facts=((_PAY + ("refund",), "To my Visa card, please."),)),
    _task("CancelBackpackMistake", "base", "U04", "name_zip",
          "Cancel your pending order #R1009: you ordered the backpack by mistake.",
          "Hi, I ordered the backpack in order #R1009 by mistake; please cancel it.",
          (_cancel("#R1009", _MISTAKE),), (_cancel("#R1009", _NL),),
          facts=((_REASON, "It was a mistake."),)),
    _task("LateDeliveryTransfer", "base", "U11", "email",
          "Your order #R1026 arrived two weeks late; you want compensation. You keep the "
          "shirt. A transfer to a human agent is fine.",
          "My order #R1026 arrived two weeks late and I want compensation for it.",
          (_transfer("Customer wants compensation for the late delivery of order #R1026."),), (),
          facts=((("return", "exchange"), "No, I want to keep the shirt; I want compensation."),)),
    _task("GiftCardBalance", "base", "U08", "name_zip",
          "Find out how much is left on your gift card. Change nothing.",
          "Hi, how much is left on my gift card?",
          (), (), outputs=("3.00",), near_miss_outputs=("30.00",), reads=(_user("U08"),)),
    # --- hard: two requests, forbidden requests, fallbacks, questions --------------------
    _task("CancelThenReturn", "hard", "U01", "email",
          "Cancel your pending headphones order #R1002 (no longer needed), then return the "
          "T-shirt of order #R1001 with the refund on your gift card.",
          "Hi, I want to cancel my pending headphones order #R1002, I don't need it anymore.",
          (_cancel("#R1002", _NL), _return("#R1001", ["1001"], "PM02")), (_cancel("#R1002", _NL),),
          facts=((_REASON, "I no longer need it."), (_PAY + ("refund",), "To my gift card.")),
          followups=("Also, I'd like to return the T-shirt from order #R1001 and get the refund on my gift card.",)),
    _task("UpgradeThenReship", "hard", "U02", "name_zip",
          "In pending order #R1004, take the sneakers in black instead of blue (same size), "
          "paid with your Mastercard; then ship the order to 5 Wharf Rd, Boston, MA 02110.",
          "Hi, in order #R1004 I want the sneakers in black instead of blue, same size.",
          (_modify_items("#R1004", ["6002"], ["6003"], "PM04"), _order_address("#R1004", "5 Wharf Rd", "Boston", "MA", "02110")),
          (_modify_items("#R1004", ["6002"], ["6003"], "PM03"), _order_address("#R1004", "5 Wharf Rd", "Boston", "MA", "02110")),
          facts=((_PAY, "Charge my Mastercard for the difference."),),
          followups=("Also, please ship order #R1004 to 5 Wharf Rd, Boston, MA 02110 instead.",)),
    _task("ExchangeAndPrice", "hard", "U03", "email",
          "Exchange the white T-shirt of order #R1006 for the black one in size M, paid with "
          "your Visa, and learn how much extra it costs.",
          "I'd like to exchange the white T-shirt from order #R1006 for the black one in size M. How much extra will that cost?",
          (_exchange("#R1006", ["1003"], ["1001"], "PM05"),), (_exchange("#R1006", ["1003"], ["1001"], "PM05"),),
          facts=((_PAY, "Charge my Visa."),), outputs=("2.00",), near_miss_outputs=("20.00",)),
    _task("GiftCardShort", "hard", "U04", "email",
          "In pending order #R1009, take the 40L backpack instead of the 20L, paid with your "
          "gift card; if the gift card does not cover it, use your Amex card.",
          "Hi, in my pending order #R1009 I want the 40L backpack instead of the 20L one, paid with my gift card.",
          (_modify_items("#R1009", ["4001"], ["4004"], "PM07"),), (_modify_items("#R1009", ["4001"], ["4004"], "PM06"),),
          facts=((("not enough", "insufficient", "doesn't cover", "does not cover", "another payment", "other payment"),
                  "Then use my Amex card."),
                 (_PAY, "My gift card, please."))),
    _task("ProcessedThenReturnOne", "hard", "U06", "email",
          "You want to cancel order #R1015 (it cannot be: it is processed). Then return one of "
          "the two brass lamps of order #R1014, refunded to your gift card.",
          "I want to cancel order #R1015.",
          (_return("#R1014", ["5003"], "PM10"),), (_return("#R1014", ["5003", "5003"], "PM10"),),
          facts=((_REASON, "I no longer need it."), (_PAY + ("refund",), "To my gift card.")),
          followups=("OK. Then I'd like to return one of the two brass lamps from order #R1014, refunded to my gift card.",)),
    _task("CancelAndReturn", "hard", "U07", "email",
          "Cancel pending order #R1017 (ordered by mistake), then return the headphones of "
          "order #R1016 with a refund to your Mastercard.",
          "Please cancel my pending order #R1017, I ordered it by mistake.",
          (_cancel("#R1017", _MISTAKE), _return("#R1016", ["3003"], "PM11")),
          (_cancel("#R1017", _NL), _return("#R1016", ["3003"], "PM11")),
          facts=((_REASON, "I ordered it by mistake."), (_PAY + ("refund",), "My Mastercard.")),
          followups=("I'd also like to return the headphones from order #R1016, refund to my card.",)),
    _task("SomeoneElsesOrder", "hard", "U09", "email",
          "You ask to cancel order #R1028 (it is not yours; you will be refused). Then cancel "
          "your own watch order #R1021: you no longer need it.",
          "Hi, please cancel order #R1028, I don't need it.",
          (_cancel("#R1021", _NL),), (_cancel("#R1028", _NL),),
          facts=((_REASON, "I no longer need it."),),
          followups=("Fine. Then cancel my watch order #R1021 instead, I no longer need it.",)),
    _task("MugCapacityPaypal", "hard", "U10", "email",
          "Exchange the 350ml mug of order #R1023 for the 500ml one in the same color; pay "
          "the difference with PayPal (not the card of the order).",
          "I want to exchange the 350ml mug from order #R1023 for the 500ml one in the same color.",
          (_exchange("#R1023", ["2002"], ["2003"], "PM16"),), (_exchange("#R1023", ["2002"], ["2003"], "PM15"),),
          facts=((_PAY, "Use my PayPal for the difference."),)),
    _task("BackpackAndBalance", "hard", "U11", "email",
          "In pending order #R1025, switch to the 40L backpack paid with your gift card, and "
          "learn what will be left on the gift card afterwards.",
          "Hi, please switch the backpack in order #R1025 to the 40L one, paid with my gift card. "
          "How much will be left on my gift card after that?",
          (_modify_items("#R1025", ["4002"], ["4004"], "PM17"),), (_modify_items("#R1025", ["4002"], ["4004"], "PM17"),),
          facts=((_PAY, "My gift card."),), outputs=("135.00",), near_miss_outputs=("150.00",)),
    _task("ReturnAndMove", "hard", "U12", "name_zip",
          "Return the sneakers of order #R1027 with a refund to your Visa, then change your "
          "account address to 40 Birch Lane, Portland, OR 97201.",
          "Hi, I'd like to return the sneakers from order #R1027.",
          (_return("#R1027", ["6002"], "PM18"), _user_address("U12", "40 Birch Lane", "Portland", "OR", "97201")),
          (_return("#R1027", ["6002"], "PM18"), _user_address("U12", "40 Birch Lane", "Portland", "OR", "97210")),
          facts=((_PAY + ("refund",), "To my Visa."), (_ADDRESS, "40 Birch Lane, Portland, OR 97201.")),
          followups=("I'm also moving: please change my account address to 40 Birch Lane, Portland, OR 97201.",)),
    _task("UnavailableSizeFallback", "hard", "U05", "email",
          "Exchange the sneakers of order #R1011 for size 11 in black; if that is not "
          "available, take size 10 in black. Pay any difference with PayPal.",
          "I'd like to exchange the sneakers from order #R1011 for size 11 in black.",
          (_exchange("#R1011", ["6001"], ["6003"], "PM08"),), (_exchange("#R1011", ["6001"], ["6002"], "PM08"),),
          facts=((("not available", "unavailable", "out of stock", "isn't available"), "Then size 10 in black, please."),
                 (_PAY, "PayPal."))),
    _task("ReturnThenTransfer", "hard", "U08", "name_zip",
          "Return the backpack of order #R1019 with the refund on your gift card; then ask for a "
          "price-match refund on earlier orders (only a human can decide that).",
          "I want to return the backpack from order #R1019 and get the refund on my gift card.",
          (_return("#R1019", ["4004"], "PM13"), _transfer("Customer asks for a price-match refund on earlier orders.")),
          (_return("#R1019", ["4004"], "PM13"),),
          facts=((_PAY + ("refund",), "My gift card."),),
          followups=("Also, the backpack was cheaper at another shop; I want a refund of the price difference on my earlier orders too.",)),
    _task("ModifyItemsOnce", "hard", "U03", "email",
          "In pending order #R1008, change the black lamp to the silver one (Visa for any "
          "difference). Then ask to change it again, to the brass one (it cannot be done).",
          "In my pending order #R1008, please change the black lamp to the silver one.",
          (_modify_items("#R1008", ["5002"], ["5001"], "PM05"),), (_modify_items("#R1008", ["5002"], ["5003"], "PM05"),),
          facts=((_PAY, "My Visa."),),
          followups=("Actually, could you change it again, to the brass one?",)),
    _task("TotalThenReturn", "hard", "U04", "email",
          "Learn the total of your delivered order #R1010, and return its T-shirt with the "
          "refund on your gift card.",
          "What was the total of my order #R1010? And I'd like to return the T-shirt from it, refunded to my gift card.",
          (_return("#R1010", ["1002"], "PM06"),), (_return("#R1010", ["1002"], "PM07"),),
          facts=((_PAY + ("refund",), "To my gift card."),), outputs=("114.00",), near_miss_outputs=("114.00",)),
)  # fmt: skip

TASKS: dict[str, RetailTask] = {t.name: t for t in _CATALOG}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


Script = Generator[str, str, None]


def reference_script(task: RetailTask, *, near_miss: bool = False) -> Script:
    """A scripted assistant for ``task``: its reference solution, or its near miss.

    It authenticates the user, makes the task's look-ups, asks for a confirmation before
    each write (then makes it), states the outputs, and asks "anything else?" until the
    user ends the conversation. Yields actions; receives each action's observation.
    """
    _, first, last, email, _, _, _, zip_code = _USERS[task.user_id]
    if task.auth == "email":
        yield "Hello! To get started, could you tell me the email address of your account?"
        yield tool_call("find_user_id_by_email", email=email)
    else:
        yield "Hello! Could you tell me your first and last name and your zip code?"
        yield tool_call("find_user_id_by_name_zip", first_name=first, last_name=last, zip=zip_code)
    for name, arguments in task.reads:
        yield tool_call(name, **arguments)
    for name, arguments in task.near_miss if near_miss else task.actions:
        if name == "transfer_to_human_agents":
            yield tool_call(name, **arguments)
            return
        if "order_id" in arguments:
            yield tool_call("get_order_details", order_id=arguments["order_id"])
        yield f"I will call {name} with {json.dumps(arguments)}. Do you confirm (yes/no)?"
        yield tool_call(name, **arguments)
    outputs = task.near_miss_outputs if near_miss else task.outputs
    if outputs:
        yield f"Here is what you asked for: {'; '.join(outputs)}. Is there anything else I can help you with?"
    while True:
        yield "Is there anything else I can help you with?"
