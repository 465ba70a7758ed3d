"""The retail domain's tools over one SQLite connection: look-ups, the six write actions, transfer.

`Retail.call(name, arguments, session_user=...)` runs one tool and returns its JSON result, or
raises `ToolError` (a bad argument: unknown id, wrong type, unavailable item) or
`PolicyViolation` (a rule of the domain policy: the order's status does not allow the
action, the order belongs to someone else, the refund method is not allowed, the user is
not authenticated). Both messages say what to do; the env shows them to the assistant.

Hardening, as the shipped MCP shop server: the agent never writes SQL (every statement is
parameterized here, so there is no query tool to constrain), every argument is checked
against the tool's JSON schema (required keys, types, no unknown keys) and capped:
strings at `MAX_STRING_CHARS`, lists at `MAX_LIST_ITEMS` entries; results are small
(one user, order or product).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

from gem_core.tools.text import is_text

__all__ = [
    "Retail",
    "ToolError",
    "PolicyViolation",
    "TOOL_SPECS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "NO_AUTH_TOOLS",
    "CANCEL_REASONS",
    "MAX_STRING_CHARS",
    "MAX_LIST_ITEMS",
    "dollars",
]

MAX_STRING_CHARS = 200
"""Longest string argument accepted (ids, names and addresses are far shorter)."""
MAX_LIST_ITEMS = 10
"""Most entries of a list argument (no order has more lines)."""
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class ToolError(ValueError):
    """A tool call with a bad argument; the message says what was expected."""


class PolicyViolation(ValueError):
    """A tool call the domain policy forbids. ``code`` names the rule (for ``info``)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def dollars(cents: int) -> str:
    """``2500 -> "25.00"`` (how prices are shown)."""
    sign = "-" if cents < 0 else ""
    cents = abs(int(cents))
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _list(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _spec(name: str, description: str, **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
    }


_ADDRESS = {
    "address1": _s("street address, e.g. '12 Birch Lane'"),
    "city": _s("city"),
    "state": _s("two-letter state code, e.g. 'OR'"),
    "zip": _s("five-digit zip code"),
}
TOOL_SPECS: tuple[dict[str, Any], ...] = (
    _spec("find_user_id_by_email", "Find a user's id from their email.", email=_s("the email")),
    _spec(
        "find_user_id_by_name_zip",
        "Find a user's id from their first name, last name and zip code.",
        first_name=_s("first name"),
        last_name=_s("last name"),
        zip=_s("zip code"),
    ),
    _spec("get_user_details", "A user's profile, payment methods and order ids.", user_id=_s("user id, e.g. 'U01'")),
    _spec(
        "get_order_details",
        "An order's status, address, payment method and items.",
        order_id=_s("order id, e.g. '#R1001'"),
    ),
    _spec("list_all_product_types", "Every product's name and id."),
    _spec(
        "get_product_details",
        "A product's items: options, price and availability.",
        product_id=_s("product id, e.g. 'P1'"),
    ),
    _spec(
        "cancel_pending_order",
        "Cancel a pending order; the total is refunded to the order's payment method.",
        order_id=_s("order id"),
        reason=_s("'no longer needed' or 'ordered by mistake'"),
    ),
    _spec(
        "modify_pending_order_address",
        "Change the shipping address of a pending order.",
        order_id=_s("order id"),
        **_ADDRESS,
    ),
    _spec(
        "modify_pending_order_items",
        "Swap items of a pending order for other options of the same products (once per "
        "order); the price difference is charged or refunded to payment_method_id.",
        order_id=_s("order id"),
        item_ids=_list("the item ids to replace (one entry per unit)"),
        new_item_ids=_list("the new item ids, in the same order"),
        payment_method_id=_s("payment method for the price difference"),
    ),
    _spec("modify_user_address", "Change a user's default address.", user_id=_s("user id"), **_ADDRESS),
    _spec(
        "return_delivered_order_items",
        "Request the return of items of a delivered order; the refund goes to "
        "payment_method_id (the order's payment method or one of the user's gift cards).",
        order_id=_s("order id"),
        item_ids=_list("the item ids to return (one entry per unit)"),
        payment_method_id=_s("payment method for the refund"),
    ),
    _spec(
        "exchange_delivered_order_items",
        "Request an exchange of items of a delivered order for other options of the same "
        "products; the price difference is charged or refunded to payment_method_id.",
        order_id=_s("order id"),
        item_ids=_list("the item ids to exchange (one entry per unit)"),
        new_item_ids=_list("the new item ids, in the same order"),
        payment_method_id=_s("payment method for the price difference"),
    ),
    _spec(
        "transfer_to_human_agents",
        "Hand the conversation to a human agent (only for requests the tools and policy "
        "cannot serve); ends the conversation.",
        summary=_s("a summary of the user's issue"),
    ),
)
TOOL_NAMES = tuple(spec["name"] for spec in TOOL_SPECS)
_SPECS = {spec["name"]: spec for spec in TOOL_SPECS}
WRITE_TOOLS = frozenset(
    {
        "cancel_pending_order",
        "modify_pending_order_address",
        "modify_pending_order_items",
        "modify_user_address",
        "return_delivered_order_items",
        "exchange_delivered_order_items",
    }
)
NO_AUTH_TOOLS = frozenset(
    {
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "list_all_product_types",
        "get_product_details",
        "transfer_to_human_agents",
    }
)


def check_arguments(name: str, arguments: Any) -> None:
    """Raise `ToolError` unless ``arguments`` fit tool ``name``'s schema and the caps."""
    spec = _SPECS.get(name)
    if spec is None:
        raise ToolError(f"unknown tool {str(name)[:80]!r}; the tools are {', '.join(TOOL_NAMES)}")
    if not isinstance(arguments, dict):
        raise ToolError(f"the arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    props = spec["parameters"]["properties"]
    missing = [k for k in props if k not in arguments]
    if missing:
        raise ToolError(f"{name}: missing argument(s) {', '.join(missing)}")
    extra = [str(k)[:40] for k in arguments if k not in props]
    if extra:
        raise ToolError(f"{name}: unknown argument(s) {', '.join(extra)}; expected {', '.join(props)}")
    for key, schema in props.items():
        value = arguments[key]
        if schema["type"] == "string":
            if not isinstance(value, str):
                raise ToolError(f"{name}: {key} must be a string, got {type(value).__name__}")
            if len(value) > MAX_STRING_CHARS:
                raise ToolError(f"{name}: {key} has {len(value)} characters; at most {MAX_STRING_CHARS}")
            if not is_text(value):
                raise ToolError(f"{name}: {key} is not valid text (it holds a lone surrogate)")
        else:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ToolError(f"{name}: {key} must be a list of strings (item ids)")
            if not value or len(value) > MAX_LIST_ITEMS:
                raise ToolError(f"{name}: {key} must have 1 to {MAX_LIST_ITEMS} entries, got {len(value)}")
            if any(len(v) > MAX_STRING_CHARS for v in value):
                raise ToolError(f"{name}: an entry of {key} is over {MAX_STRING_CHARS} characters")
            if not all(is_text(v) for v in value):
                raise ToolError(f"{name}: an entry of {key} is not valid text (it holds a lone surrogate)")


class Retail:
    """The tools over ``conn`` (an episode's database). Writes commit at once."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        conn.row_factory = sqlite3.Row

    def call(self, name: str, arguments: dict[str, Any], *, session_user: str | None) -> str:
        """Run tool ``name``; ``session_user`` is the authenticated user (``None``: nobody yet).

        Returns:
            The result as JSON text.

        Raises:
            ToolError, PolicyViolation: see the module docstring.
        """
        check_arguments(name, arguments)
        if name not in NO_AUTH_TOOLS and session_user is None:
            raise PolicyViolation(
                "not_authenticated",
                "authenticate the user first: find their user id by email "
                "(find_user_id_by_email) or by name and zip code (find_user_id_by_name_zip)",
            )
        result = getattr(self, name)(session_user=session_user, **arguments)
        return json.dumps(result, ensure_ascii=False)

    # --- look-ups -----------------------------------------------------------------------
    def _one(self, sql: str, params: tuple) -> sqlite3.Row | None:
        return self.conn.execute(sql, params).fetchone()

    def find_user_id_by_email(self, *, session_user: str | None, email: str) -> dict[str, Any]:
        row = self._one("SELECT user_id FROM users WHERE lower(email) = ?", (email.strip().lower(),))
        if row is None:
            raise ToolError(f"no user has the email {email[:80]!r}; ask the user to check it")
        return {"user_id": row["user_id"]}

    def find_user_id_by_name_zip(
        self, *, session_user: str | None, first_name: str, last_name: str, zip: str
    ) -> dict[str, Any]:
        row = self._one(
            "SELECT user_id FROM users WHERE lower(first_name) = ? AND lower(last_name) = ? AND zip = ?",
            (first_name.strip().lower(), last_name.strip().lower(), zip.strip()),
        )
        if row is None:
            raise ToolError("no user has that first name, last name and zip code; ask the user to check them")
        return {"user_id": row["user_id"]}

    def _user(self, user_id: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM users WHERE user_id = ?", (user_id,))
        if row is None:
            raise ToolError(f"no user has the id {user_id[:80]!r}")
        return row

    def _own_user(self, user_id: str, session_user: str | None) -> sqlite3.Row:
        row = self._user(user_id)
        if user_id != session_user:
            raise PolicyViolation(
                "other_user",
                f"user {user_id} is not the authenticated user ({session_user}); you may only "
                "access and change the authenticated user's account",
            )
        return row

    def get_user_details(self, *, session_user: str | None, user_id: str) -> dict[str, Any]:
        uid = user_id
        row = self._own_user(uid, session_user)
        payments = [
            {
                "payment_method_id": p["payment_id"],
                "kind": p["kind"],
                "description": p["description"],
                **({"balance": dollars(p["balance_cents"])} if p["balance_cents"] is not None else {}),
            }
            for p in self.conn.execute(
                "SELECT * FROM payment_methods WHERE user_id = ? ORDER BY payment_id", (uid,)
            )
        ]
        orders = [
            r["order_id"]
            for r in self.conn.execute("SELECT order_id FROM orders WHERE user_id = ? ORDER BY order_id", (uid,))
        ]
        return {
            "user_id": uid,
            "name": f"{row['first_name']} {row['last_name']}",
            "email": row["email"],
            "address": _address(row),
            "payment_methods": payments,
            "orders": orders,
        }

    def _order(self, order_id: str, session_user: str | None) -> sqlite3.Row:
        row = self._one("SELECT * FROM orders WHERE order_id = ?", (order_id.strip(),))
        if row is None:
            hint = "" if order_id.strip().startswith("#") else " (order ids look like '#R1001')"
            raise ToolError(f"no order has the id {order_id[:80]!r}{hint}")
        if row["user_id"] != session_user:
            raise PolicyViolation(
                "other_user",
                f"order {row['order_id']} does not belong to the authenticated user; you may only "
                "access and change the authenticated user's orders",
            )
        return row

    def _lines(self, order_id: str) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT l.*, i.product_id, i.options, p.name FROM order_items l "
            "JOIN items i ON i.item_id = l.item_id JOIN products p ON p.product_id = i.product_id "
            "WHERE l.order_id = ? ORDER BY l.line",
            (order_id,),
        ).fetchall()

    def get_order_details(self, *, session_user: str | None, order_id: str) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        lines = self._lines(row["order_id"])
        return {
            "order_id": row["order_id"],
            "user_id": row["user_id"],
            "status": row["status"],
            "placed": row["placed"],
            "address": _address(row),
            "payment_method_id": row["payment_id"],
            "items": [
                {
                    "item_id": line["item_id"],
                    "product": line["name"],
                    "product_id": line["product_id"],
                    "options": line["options"],
                    "price": dollars(line["price_cents"]),
                    **({"state": line["state"]} if line["state"] != "ordered" else {}),
                    **({"new_item_id": line["new_item_id"]} if line["new_item_id"] else {}),
                }
                for line in lines
            ],
            "total": dollars(sum(line["price_cents"] for line in lines)),
            **({"cancel_reason": row["cancel_reason"]} if row["cancel_reason"] else {}),
            **({"items_modified": True} if row["items_modified"] else {}),
        }

    def list_all_product_types(self, *, session_user: str | None) -> dict[str, str]:
        return {r["name"]: r["product_id"] for r in self.conn.execute("SELECT * FROM products ORDER BY product_id")}

    def get_product_details(self, *, session_user: str | None, product_id: str) -> dict[str, Any]:
        row = self._one("SELECT * FROM products WHERE product_id = ?", (product_id.strip(),))
        if row is None:
            raise ToolError(f"no product has the id {product_id[:80]!r}; see list_all_product_types")
        items = [
            {
                "item_id": i["item_id"],
                "options": i["options"],
                "price": dollars(i["price_cents"]),
                "available": bool(i["available"]),
            }
            for i in self.conn.execute(
                "SELECT * FROM items WHERE product_id = ? ORDER BY item_id", (row["product_id"],)
            )
        ]
        return {"product_id": row["product_id"], "name": row["name"], "items": items}

    # --- writes ---------------------------------------------------------------------------
    def _status(self, row: sqlite3.Row, allowed: str, action: str, done: str) -> None:
        if row["status"] != allowed:
            hint = (
                " (a delivered order can be returned or exchanged instead)"
                if allowed == "pending" and row["status"] == "delivered"
                else ""
            )
            raise PolicyViolation(
                f"{action}_not_{allowed}",
                f"order {row['order_id']} is {row['status']}; only {allowed} orders can be {done}{hint}",
            )

    def _payment(self, payment_id: str, owner: str) -> sqlite3.Row:
        row = self._one("SELECT * FROM payment_methods WHERE payment_id = ?", (payment_id.strip(),))
        if row is None or row["user_id"] != owner:
            raise ToolError(
                f"{payment_id[:80]!r} is not one of the user's payment methods; see get_user_details"
            )
        return row

    def _charge(self, order_id: str, payment: sqlite3.Row, diff: int) -> None:
        """Settle a price difference: ``diff > 0`` charges, ``< 0`` refunds, on ``payment``."""
        if diff == 0:
            return
        if payment["kind"] == "gift_card":
            if diff > payment["balance_cents"]:
                raise ToolError(
                    f"the gift card {payment['payment_id']} has {dollars(payment['balance_cents'])} "
                    f"left, less than the {dollars(diff)} to pay; use another payment method"
                )
            self.conn.execute(
                "UPDATE payment_methods SET balance_cents = balance_cents - ? WHERE payment_id = ?",
                (diff, payment["payment_id"]),
            )
        self.conn.execute(
            "INSERT INTO transactions VALUES (?, ?, ?, ?)",
            (order_id, payment["payment_id"], "payment" if diff > 0 else "refund", abs(diff)),
        )

    def _pick_lines(self, order_id: str, item_ids: list[str], *, state: str = "ordered") -> list[sqlite3.Row]:
        lines = [line for line in self._lines(order_id) if line["state"] == state]
        picked: list[sqlite3.Row] = []
        for item_id in item_ids:
            match = next((line for line in lines if line["item_id"] == item_id.strip()), None)
            if match is None:
                count = Counter(i.strip() for i in item_ids)[item_id.strip()]
                raise ToolError(
                    f"order {order_id} has no{' more' if count > 1 else ''} item {item_id[:40]!r} to "
                    "change; list each unit once, with the item ids of get_order_details"
                )
            lines.remove(match)
            picked.append(match)
        return picked

    def _swaps(self, lines: list[sqlite3.Row], new_item_ids: list[str]) -> list[sqlite3.Row]:
        if len(new_item_ids) != len(lines):
            raise ToolError(
                f"item_ids has {len(lines)} entries but new_item_ids has {len(new_item_ids)}; give one new item per item"
            )
        new_rows = []
        for line, new_id in zip(lines, new_item_ids, strict=True):
            row = self._one("SELECT * FROM items WHERE item_id = ?", (new_id.strip(),))
            if row is None:
                raise ToolError(f"no item has the id {new_id[:40]!r}; see get_product_details")
            if row["product_id"] != line["product_id"]:
                raise ToolError(
                    f"item {row['item_id']} is not a {line['name']}; an item can only be swapped for "
                    "another option of the same product"
                )
            if row["item_id"] == line["item_id"]:
                raise ToolError(f"item {row['item_id']} would be swapped for itself")
            if not row["available"]:
                raise ToolError(f"item {row['item_id']} ({row['options']}) is not available")
            new_rows.append(row)
        return new_rows

    def cancel_pending_order(self, *, session_user: str | None, order_id: str, reason: str) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        self._status(row, "pending", "cancel", "cancelled")
        reason = reason.strip().lower()
        if reason not in CANCEL_REASONS:
            raise ToolError(f"reason must be one of {', '.join(map(repr, CANCEL_REASONS))}")
        total = sum(line["price_cents"] for line in self._lines(row["order_id"]))
        with self.conn:
            self.conn.execute(
                "UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE order_id = ?",
                (reason, row["order_id"]),
            )
            payment = self._payment(row["payment_id"], row["user_id"])
            self._charge(row["order_id"], payment, -total)
        return self.get_order_details(session_user=session_user, order_id=row["order_id"])

    def modify_pending_order_address(self, *, session_user: str | None, order_id: str, **address: str) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        self._status(row, "pending", "modify", "modified")
        with self.conn:
            self.conn.execute(
                "UPDATE orders SET address1 = ?, city = ?, state = ?, zip = ? WHERE order_id = ?",
                (*_clean_address(address), row["order_id"]),
            )
        return self.get_order_details(session_user=session_user, order_id=row["order_id"])

    def modify_user_address(self, *, session_user: str | None, user_id: str, **args: str) -> dict[str, Any]:
        uid = user_id
        self._own_user(uid, session_user)
        with self.conn:
            self.conn.execute(
                "UPDATE users SET address1 = ?, city = ?, state = ?, zip = ? WHERE user_id = ?",
                (*_clean_address(args), uid),
            )
        return self.get_user_details(session_user=session_user, user_id=uid)

    def modify_pending_order_items(
        self, *, session_user: str | None, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        self._status(row, "pending", "modify", "modified")
        if row["items_modified"]:
            raise PolicyViolation(
                "items_already_modified",
                f"the items of order {row['order_id']} were already modified once; they cannot be modified again",
            )
        lines = self._pick_lines(row["order_id"], item_ids)
        new_rows = self._swaps(lines, new_item_ids)
        payment = self._payment(payment_method_id, row["user_id"])
        diff = sum(n["price_cents"] for n in new_rows) - sum(line["price_cents"] for line in lines)
        with self.conn:
            self._charge(row["order_id"], payment, diff)
            for line, new in zip(lines, new_rows, strict=True):
                self.conn.execute(
                    "UPDATE order_items SET item_id = ?, price_cents = ? WHERE order_id = ? AND line = ?",
                    (new["item_id"], new["price_cents"], row["order_id"], line["line"]),
                )
            self.conn.execute("UPDATE orders SET items_modified = 1 WHERE order_id = ?", (row["order_id"],))
        return self.get_order_details(session_user=session_user, order_id=row["order_id"])

    def return_delivered_order_items(
        self, *, session_user: str | None, order_id: str, item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        self._status(row, "delivered", "return", "returned")
        lines = self._pick_lines(row["order_id"], item_ids)
        payment = self._payment(payment_method_id, row["user_id"])
        if payment["payment_id"] != row["payment_id"] and payment["kind"] != "gift_card":
            raise PolicyViolation(
                "refund_method",
                "a refund goes to the order's own payment method "
                f"({row['payment_id']}) or to one of the user's gift cards, not to {payment['payment_id']}",
            )
        with self.conn:
            self._charge(row["order_id"], payment, -sum(line["price_cents"] for line in lines))
            for line in lines:
                self.conn.execute(
                    "UPDATE order_items SET state = 'return requested' WHERE order_id = ? AND line = ?",
                    (row["order_id"], line["line"]),
                )
            self.conn.execute("UPDATE orders SET status = 'return requested' WHERE order_id = ?", (row["order_id"],))
        return self.get_order_details(session_user=session_user, order_id=row["order_id"])

    def exchange_delivered_order_items(
        self, *, session_user: str | None, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        row = self._order(order_id, session_user)
        self._status(row, "delivered", "exchange", "exchanged")
        lines = self._pick_lines(row["order_id"], item_ids)
        new_rows = self._swaps(lines, new_item_ids)
        payment = self._payment(payment_method_id, row["user_id"])
        diff = sum(n["price_cents"] for n in new_rows) - sum(line["price_cents"] for line in lines)
        with self.conn:
            self._charge(row["order_id"], payment, diff)
            for line, new in zip(lines, new_rows, strict=True):
                self.conn.execute(
                    "UPDATE order_items SET state = 'exchange requested', new_item_id = ? "
                    "WHERE order_id = ? AND line = ?",
                    (new["item_id"], row["order_id"], line["line"]),
                )
            self.conn.execute("UPDATE orders SET status = 'exchange requested' WHERE order_id = ?", (row["order_id"],))
        return self.get_order_details(session_user=session_user, order_id=row["order_id"])

    def transfer_to_human_agents(self, *, session_user: str | None, summary: str) -> dict[str, Any]:
        return {"transferred": True}


def _address(row: sqlite3.Row) -> dict[str, str]:
    return {"address1": row["address1"], "city": row["city"], "state": row["state"], "zip": row["zip"]}


def _clean_address(address: dict[str, str]) -> tuple[str, str, str, str]:
    parts = tuple(" ".join(address[k].split()) for k in ("address1", "city", "state", "zip"))
    if not all(parts):
        raise ToolError("address1, city, state and zip must all be non-empty")
    return parts[0], parts[1], parts[2].upper(), parts[3]
