"""The mcp:* task catalog: task templates over the shop database, their graders and scripts.

A `Task` draws one `TaskInstance` per episode from the seed database (which customer,
product, category ... the question is about) and knows how to grade it:

- **read** tasks (``lookup``, ``aggregate``) have an expected answer, computed with SQL on
  the seed database when the instance is drawn; the agent's final answer must match it
  (numbers numerically, names case- and space-insensitively).
- **write** tasks (``insert``, ``update``) describe a change; `Task.apply` makes the intended
  change with plain SQL on a copy of the seed, and the agent succeeds when its final
  database equals that expected database, table by table and row by row (so extra or
  missing changes fail too).

Each task also has a scripted **reference solution** (`Task.solve`: tool calls through the
MCP server, reading their results, then the final answer) and a **near miss** (`Task.near_miss`:
a plausible but wrong solution). Both are generators: they yield actions and receive the
observation of each action (``gen.send(obs)``); `play_script` runs one in an env. Tests
prove every reference solution passes and every near miss fails.
"""

from __future__ import annotations

import csv
import io
import json
import random
import sqlite3
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "Task",
    "TaskInstance",
    "TASKS",
    "TASK_NAMES",
    "Script",
    "tool_call",
    "final_answer",
    "csv_rows",
    "answers_match",
    "table_dump",
    "play_script",
]

Script = Generator[str, str, None]
"""A scripted agent: yields actions, receives each action's observation."""


@dataclass(frozen=True)
class TaskInstance:
    """One drawn task.

    Attributes:
        task: the task name (``"Restock"``; the env id is ``mcp:Restock-v0``).
        prompt: the request shown to the agent.
        params: what was drawn (ids, names, amounts), for the grader and the scripts.
        answer: the expected final answer of a read task (``None`` for write tasks).
    """

    task: str
    prompt: str
    params: dict[str, Any] = field(default_factory=dict)
    answer: int | str | None = None


# --- helpers for scripts and graders ---------------------------------------------------
def tool_call(tool: str, /, **arguments: Any) -> str:
    """The action that calls MCP tool ``tool`` with ``arguments`` (JSON tool-call format)."""
    return "<tool_call>" + json.dumps({"name": tool, "arguments": arguments}) + "</tool_call>"


def final_answer(text: Any) -> str:
    """The action that gives the final answer ``text``."""
    return f"<answer>{text}</answer>"


def csv_rows(observation: str) -> list[dict[str, str]]:
    """The rows of a ``query`` result (CSV with a header, then a ``(N rows)`` line)."""
    body = observation.rsplit("\n(", 1)[0] if observation.endswith(")") else observation
    return list(csv.DictReader(io.StringIO(body)))


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _norm_text(text: str) -> str:
    return " ".join(text.strip().strip(".\"'`").split()).casefold()


def _as_int(text: str) -> int | None:
    t = text.strip().casefold().replace(",", "").replace("$", "").replace("_", "")
    for suffix in ("cents", "cent", "units", "products", "orders"):
        if t.endswith(suffix):
            t = t[: -len(suffix)].strip()
    t = t.rstrip(".")
    if t.endswith(".0"):
        t = t[:-2]
    try:
        return int(t)
    except ValueError:
        return None


def answers_match(given: str, expected: int | str) -> bool:
    """Whether the final answer ``given`` matches ``expected``.

    Integers compare numerically (``"1,234"``, ``"1234 cents"`` and ``"$1234"`` all read
    as 1234); text compares case-insensitively with surrounding quotes, a final period and
    repeated spaces ignored.
    """
    if isinstance(expected, int):
        return _as_int(given) == expected
    return _norm_text(given) == _norm_text(str(expected))


def table_dump(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """Every table's rows, sorted: the state a write task is graded on."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        )
    ]
    dump = {}
    for table in tables:
        rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
        dump[table] = sorted((tuple(r) for r in rows), key=repr)
    return dump


def play_script(
    env: Any, script: Script, max_steps: int = 50
) -> tuple[float, bool, bool, dict[str, Any], list[str]]:
    """Run a scripted agent on a reset ``env`` until the episode ends or the script stops.

    Returns ``(last reward, terminated, truncated, last info, observations)``.
    """
    observations: list[str] = []
    reward, terminated, truncated, info = 0.0, False, False, {}
    try:
        action = next(script)
        for _ in range(max_steps):
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs)
            if terminated or truncated:
                break
            action = script.send(obs)
    except StopIteration:
        pass
    return float(reward), terminated, truncated, info, observations


def _rows(db: sqlite3.Connection, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
    db.row_factory = sqlite3.Row
    return db.execute(sql, params).fetchall()


def _one(db: sqlite3.Connection, sql: str, params: tuple = ()) -> Any:
    row = db.execute(sql, params).fetchone()
    return row[0] if row is not None else None


_SPEND_SQL = (
    "SELECT COALESCE(SUM(i.quantity * i.unit_price_cents), 0) FROM orders o "
    "JOIN order_items i ON i.order_id = o.id WHERE o.customer_id = ? AND o.status != 'cancelled'"
)


# --- the task base ------------------------------------------------------------------------
class Task:
    """A task template; subclasses set the class attributes and implement the methods.

    Class attributes:
        name: the task name (the env id is ``mcp:<name>-v0``).
        kind: ``"lookup"``, ``"aggregate"`` (read tasks), ``"insert"`` or ``"update"``
            (write tasks).
        description: one line for the registry listing.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    description: ClassVar[str] = ""

    @property
    def writes(self) -> bool:
        """Whether the task is graded on the final database (insert/update tasks)."""
        return self.kind in ("insert", "update")

    def sample(self, rng: random.Random, db: sqlite3.Connection) -> TaskInstance:
        """Draw an instance from ``rng``, reading the seed database ``db``."""
        raise NotImplementedError

    def apply(self, db: sqlite3.Connection, inst: TaskInstance) -> None:
        """Write tasks: make the intended change on ``db`` (a copy of the seed) with SQL."""
        raise NotImplementedError(f"{self.name} is a read task; it has no apply()")

    def solve(self, inst: TaskInstance) -> Script:
        """The reference solution: tool calls, then the final answer."""
        raise NotImplementedError

    def near_miss(self, inst: TaskInstance) -> Script:
        """A plausible wrong solution (tests prove it fails)."""
        raise NotImplementedError


def _wrong_text(expected: str, options: list[str]) -> str:
    return next(o for o in options if _norm_text(o) != _norm_text(expected))


# --- look-ups -------------------------------------------------------------------------------
class CustomerCity(Task):
    name = "CustomerCity"
    kind = "lookup"
    description = "Find the city of the customer with a given email."

    def sample(self, rng, db):
        row = rng.choice(_rows(db, "SELECT email, city FROM customers ORDER BY id"))
        prompt = f"In which city does the customer with the email address {row['email']} live?"
        return TaskInstance(self.name, prompt, {"email": row["email"]}, row["city"])

    def solve(self, inst):
        obs = yield tool_call("get_customer", email=inst.params["email"])
        yield final_answer(json.loads(obs)["city"])

    def near_miss(self, inst):
        yield final_answer(_wrong_text(str(inst.answer), ["Lisbon", "Porto"]))


class ProductStock(Task):
    name = "ProductStock"
    kind = "lookup"
    description = "Find how many units of a product (given by name) are in stock."

    def sample(self, rng, db):
        row = rng.choice(_rows(db, "SELECT name, stock FROM products ORDER BY id"))
        prompt = f'How many units of the product "{row["name"]}" are in stock?'
        return TaskInstance(self.name, prompt, {"product": row["name"]}, row["stock"])

    def solve(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku FROM products WHERE name = {_sql_text(inst.params['product'])}",
        )
        obs = yield tool_call("get_product", sku=csv_rows(obs)[0]["sku"])
        yield final_answer(json.loads(obs)["stock"])

    def near_miss(self, inst):
        yield final_answer(int(inst.answer) + 1)  # type: ignore[arg-type]


class LatestOrderStatus(Task):
    name = "LatestOrderStatus"
    kind = "lookup"
    description = "Find the status of a customer's most recent order."

    def sample(self, rng, db):
        candidates = _rows(
            db,
            "SELECT c.id, c.name, o.status FROM customers c JOIN orders o ON o.customer_id = c.id "
            "WHERE o.order_date = (SELECT MAX(order_date) FROM orders WHERE customer_id = c.id) "
            "AND (SELECT COUNT(*) FROM orders WHERE customer_id = c.id AND order_date = o.order_date) = 1 "
            "ORDER BY c.id",
        )
        row = rng.choice(candidates)
        prompt = f"What is the status of the most recent order placed by {row['name']}?"
        return TaskInstance(self.name, prompt, {"customer": row["name"]}, row["status"])

    def solve(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT id FROM customers WHERE name = {_sql_text(inst.params['customer'])}",
        )
        obs = yield tool_call("get_customer", customer_id=int(csv_rows(obs)[0]["id"]))
        orders = json.loads(obs)["orders"]
        latest = max(orders, key=lambda o: o["order_date"])
        yield final_answer(latest["status"])

    def near_miss(self, inst):
        yield final_answer(_wrong_text(str(inst.answer), ["delivered", "pending"]))


class CheapestInCategory(Task):
    name = "CheapestInCategory"
    kind = "lookup"
    description = "Find the SKU of the cheapest product of a category."

    def sample(self, rng, db):
        categories = []
        for (category,) in db.execute(
            "SELECT DISTINCT category FROM products ORDER BY 1"
        ).fetchall():
            prices = sorted(
                r[0]
                for r in db.execute(
                    "SELECT price_cents FROM products WHERE category = ?", (category,)
                )
            )
            if len(prices) == 1 or prices[0] < prices[1]:  # a unique cheapest product
                categories.append(category)
        category = rng.choice(categories)
        sku = _one(
            db,
            "SELECT sku FROM products WHERE category = ? ORDER BY price_cents LIMIT 1",
            (category,),
        )
        prompt = f"What is the SKU of the cheapest product in the category {category!r}?"
        return TaskInstance(self.name, prompt, {"category": category}, sku)

    def solve(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku, price_cents FROM products WHERE category = {_sql_text(inst.params['category'])}",
        )
        rows = csv_rows(obs)
        yield final_answer(min(rows, key=lambda r: int(r["price_cents"]))["sku"])

    def near_miss(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku, price_cents FROM products WHERE category = {_sql_text(inst.params['category'])}",
        )
        yield final_answer(max(csv_rows(obs), key=lambda r: int(r["price_cents"]))["sku"])


# --- aggregates -------------------------------------------------------------------------------
class OrderTotal(Task):
    name = "OrderTotal"
    kind = "aggregate"
    description = "Compute an order's total from its items' unit prices."

    def sample(self, rng, db):
        order_id = rng.choice([r[0] for r in db.execute("SELECT id FROM orders ORDER BY id")])
        total = _one(
            db,
            "SELECT SUM(quantity * unit_price_cents) FROM order_items WHERE order_id = ?",
            (order_id,),
        )
        prompt = (
            f"What is the total of order #{order_id} in cents, i.e. the sum of quantity times "
            "the unit price it was sold at, over its items?"
        )
        return TaskInstance(self.name, prompt, {"order_id": order_id}, total)

    def solve(self, inst):
        obs = yield tool_call("get_order", order_id=inst.params["order_id"])
        items = json.loads(obs)["items"]
        yield final_answer(sum(i["quantity"] * i["unit_price_cents"] for i in items))

    def near_miss(self, inst):
        # Uses today's prices instead of the prices the order was sold at.
        obs = yield tool_call(
            "query",
            sql="SELECT SUM(i.quantity * p.price_cents) AS total FROM order_items i JOIN products p "
            f"ON p.id = i.product_id WHERE i.order_id = {int(inst.params['order_id'])}",
        )
        total = int(csv_rows(obs)[0]["total"])
        yield final_answer(total if total != inst.answer else total + 100)


class CustomerSpend(Task):
    name = "CustomerSpend"
    kind = "aggregate"
    description = "Sum what a customer spent over their orders that were not cancelled."

    def sample(self, rng, db):
        customers = _rows(
            db,
            "SELECT DISTINCT c.id, c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
            "WHERE o.status != 'cancelled' ORDER BY c.id",
        )
        row = rng.choice(customers)
        prompt = (
            f"How much has {row['name']} spent in total, in cents, over all of their orders that "
            "were not cancelled (quantity times unit price, summed)?"
        )
        return TaskInstance(
            self.name, prompt, {"customer": row["name"]}, _one(db, _SPEND_SQL, (row["id"],))
        )

    def solve(self, inst):
        obs = yield tool_call(
            "query",
            sql="SELECT o.status, i.quantity, i.unit_price_cents FROM orders o JOIN order_items i "
            "ON i.order_id = o.id JOIN customers c ON c.id = o.customer_id "
            f"WHERE c.name = {_sql_text(inst.params['customer'])}",
        )
        rows = [r for r in csv_rows(obs) if r["status"] != "cancelled"]
        yield final_answer(sum(int(r["quantity"]) * int(r["unit_price_cents"]) for r in rows))

    def near_miss(self, inst):
        # Forgets to leave out cancelled orders (or, with none, is off by one cent).
        obs = yield tool_call(
            "query",
            sql="SELECT SUM(i.quantity * i.unit_price_cents) AS s FROM orders o JOIN order_items i "
            "ON i.order_id = o.id JOIN customers c ON c.id = o.customer_id "
            f"WHERE c.name = {_sql_text(inst.params['customer'])}",
        )
        total = int(csv_rows(obs)[0]["s"])
        yield final_answer(total if total != inst.answer else total + 1)


class CategoryRevenue(Task):
    name = "CategoryRevenue"
    kind = "aggregate"
    description = "Sum the revenue of a product category over delivered orders."

    def sample(self, rng, db):
        category = rng.choice(
            [r[0] for r in db.execute("SELECT DISTINCT category FROM products ORDER BY 1")]
        )
        total = _one(
            db,
            "SELECT COALESCE(SUM(i.quantity * i.unit_price_cents), 0) FROM order_items i "
            "JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
            "WHERE o.status = 'delivered' AND p.category = ?",
            (category,),
        )
        prompt = (
            f"What is the revenue, in cents, of the category {category!r} over delivered orders "
            "only (quantity times unit price, summed over their items of that category)?"
        )
        return TaskInstance(self.name, prompt, {"category": category}, total)

    def _query(self, inst: TaskInstance, statuses: str) -> str:
        return tool_call(
            "query",
            sql="SELECT SUM(i.quantity * i.unit_price_cents) AS revenue FROM order_items i "
            "JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id "
            f"WHERE o.status IN ({statuses}) AND p.category = {_sql_text(inst.params['category'])}",
        )

    def solve(self, inst):
        obs = yield self._query(inst, "'delivered'")
        yield final_answer(int(csv_rows(obs)[0]["revenue"] or 0))

    def near_miss(self, inst):
        obs = yield self._query(inst, "'delivered', 'shipped', 'pending'")
        total = int(csv_rows(obs)[0]["revenue"] or 0)
        yield final_answer(total if total != inst.answer else total + 1)


class TopCustomer(Task):
    name = "TopCustomer"
    kind = "aggregate"
    description = "Find the customer of a city who spent the most (orders not cancelled)."

    def _ranking(self, db: sqlite3.Connection, city: str) -> list[tuple[int, str]]:
        people = _rows(db, "SELECT id, name FROM customers WHERE city = ? ORDER BY id", (city,))
        return sorted(((_one(db, _SPEND_SQL, (p["id"],)), p["name"]) for p in people), reverse=True)

    def sample(self, rng, db):
        cities = []
        for (city,) in db.execute("SELECT DISTINCT city FROM customers ORDER BY city").fetchall():
            ranking = self._ranking(db, city)
            if len(ranking) >= 2 and ranking[0][0] > ranking[1][0] > 0:
                cities.append((city, ranking[0][1]))
        city, top = rng.choice(cities)
        prompt = (
            f"Which customer living in {city} has spent the most money over their orders that "
            "were not cancelled? Answer with the customer's full name."
        )
        return TaskInstance(self.name, prompt, {"city": city}, top)

    def _query(self, inst: TaskInstance, condition: str) -> str:
        return tool_call(
            "query",
            sql="SELECT c.name, SUM(i.quantity * i.unit_price_cents) AS spent FROM customers c "
            "JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id "
            f"WHERE c.city = {_sql_text(inst.params['city'])}{condition} "
            "GROUP BY c.id ORDER BY spent DESC",
        )

    def solve(self, inst):
        obs = yield self._query(inst, " AND o.status != 'cancelled'")
        yield final_answer(csv_rows(obs)[0]["name"])

    def near_miss(self, inst):
        obs = yield self._query(inst, " AND o.status != 'cancelled'")
        yield final_answer(csv_rows(obs)[1]["name"])  # the runner-up


class LowStockCount(Task):
    name = "LowStockCount"
    kind = "aggregate"
    description = "Count the products of a category with fewer than k units in stock."

    def sample(self, rng, db):
        category = rng.choice(
            [r[0] for r in db.execute("SELECT DISTINCT category FROM products ORDER BY 1")]
        )
        stocks = sorted(
            {r[0] for r in db.execute("SELECT stock FROM products WHERE category = ?", (category,))}
        )
        threshold = rng.choice(stocks[1:] or stocks)  # equal to some stock: "<" vs "<=" matters
        count = _one(
            db,
            "SELECT COUNT(*) FROM products WHERE category = ? AND stock < ?",
            (category, threshold),
        )
        prompt = (
            f"How many products in the category {category!r} have fewer than {threshold} units "
            "in stock?"
        )
        return TaskInstance(
            self.name, prompt, {"category": category, "threshold": threshold}, count
        )

    def solve(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku, stock FROM products WHERE category = {_sql_text(inst.params['category'])}",
        )
        yield final_answer(sum(int(r["stock"]) < inst.params["threshold"] for r in csv_rows(obs)))

    def near_miss(self, inst):
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku, stock FROM products WHERE category = {_sql_text(inst.params['category'])}",
        )
        yield final_answer(sum(int(r["stock"]) <= inst.params["threshold"] for r in csv_rows(obs)))


# --- inserts -----------------------------------------------------------------------------------
_NEW_FIRST = [
    "Aino",
    "Bastien",
    "Carmen",
    "Darius",
    "Esme",
    "Florin",
    "Greta",
    "Hugo",
    "Ines",
    "Jonas",
]
_NEW_LAST = [
    "Quintero",
    "Rasmussen",
    "Salo",
    "Tiwari",
    "Ueda",
    "Vargas",
    "Weller",
    "Yilmaz",
    "Zeller",
]
_NEW_CITIES = ["Lisbon", "Porto", "Lyon", "Graz", "Valencia", "Ghent", "Bergen"]


class AddCustomer(Task):
    name = "AddCustomer"
    kind = "insert"
    description = "Register a new customer."

    def sample(self, rng, db):
        first, last, city = rng.choice(_NEW_FIRST), rng.choice(_NEW_LAST), rng.choice(_NEW_CITIES)
        name, email = f"{first} {last}", f"{first.lower()}.{last.lower()}@example.org"
        prompt = (
            f"Register a new customer: {name}, email {email}, living in {city}. "
            "Do not change anything else."
        )
        return TaskInstance(self.name, prompt, {"name": name, "email": email, "city": city})

    def apply(self, db, inst):
        today = _one(db, "SELECT value FROM settings WHERE key = 'today'")
        p = inst.params
        db.execute(
            "INSERT INTO customers (name, email, city, joined) VALUES (?, ?, ?, ?)",
            (p["name"], p["email"], p["city"], today),
        )

    def solve(self, inst):
        p = inst.params
        yield tool_call("add_customer", name=p["name"], email=p["email"], city=p["city"])
        yield final_answer("done")

    def near_miss(self, inst):
        p = inst.params
        city = _wrong_text(p["city"], ["Lisbon", "Porto"])
        yield tool_call("add_customer", name=p["name"], email=p["email"], city=city)
        yield final_answer("done")


class PlaceOrder(Task):
    name = "PlaceOrder"
    kind = "insert"
    description = "Place a two-product order for a customer given by email."

    def sample(self, rng, db):
        customer = rng.choice(_rows(db, "SELECT id, email FROM customers ORDER BY id"))
        products = rng.sample(
            _rows(db, "SELECT id, name, stock FROM products WHERE stock >= 3 ORDER BY id"), 2
        )
        lines = [(p["name"], rng.randint(1, 3)) for p in products]
        wanted = " and ".join(f"{q} x {n!r}" for n, q in lines)
        prompt = (
            f"The customer with the email {customer['email']} wants to buy {wanted}. Place this "
            "as a single order."
        )
        params = {"email": customer["email"], "customer_id": customer["id"], "lines": lines}
        return TaskInstance(self.name, prompt, params)

    def apply(self, db, inst):
        today = _one(db, "SELECT value FROM settings WHERE key = 'today'")
        cur = db.execute(
            "INSERT INTO orders (customer_id, order_date, status) VALUES (?, ?, 'pending')",
            (inst.params["customer_id"], today),
        )
        for name, quantity in inst.params["lines"]:
            product_id, price = db.execute(
                "SELECT id, price_cents FROM products WHERE name = ?", (name,)
            ).fetchone()
            db.execute(
                "INSERT INTO order_items VALUES (?, ?, ?, ?)",
                (cur.lastrowid, product_id, quantity, price),
            )
            db.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (quantity, product_id))

    def _items(self, inst: TaskInstance) -> Script:
        obs = yield tool_call("get_customer", email=inst.params["email"])
        customer_id = json.loads(obs)["id"]
        names = ", ".join(_sql_text(n) for n, _ in inst.params["lines"])
        obs = yield tool_call(
            "query", sql=f"SELECT sku, name FROM products WHERE name IN ({names})"
        )
        sku = {r["name"]: r["sku"] for r in csv_rows(obs)}
        items = [{"sku": sku[n], "quantity": q} for n, q in inst.params["lines"]]
        return customer_id, items

    def solve(self, inst):
        customer_id, items = yield from self._items(inst)
        yield tool_call("add_order", customer_id=customer_id, items=items)
        yield final_answer("done")

    def near_miss(self, inst):
        customer_id, items = yield from self._items(inst)
        yield tool_call("add_order", customer_id=customer_id, items=items[:1])
        yield final_answer("done")


# --- updates -----------------------------------------------------------------------------------
class Restock(Task):
    name = "Restock"
    kind = "update"
    description = "Add a delivery of n units to a product's stock."

    def sample(self, rng, db):
        product = rng.choice(_rows(db, "SELECT name FROM products ORDER BY id"))
        amount = rng.randint(5, 30)
        prompt = (
            f'A delivery of {amount} units of "{product["name"]}" has arrived. Add them to the '
            "product's stock."
        )
        return TaskInstance(self.name, prompt, {"product": product["name"], "amount": amount})

    def apply(self, db, inst):
        db.execute(
            "UPDATE products SET stock = stock + ? WHERE name = ?",
            (inst.params["amount"], inst.params["product"]),
        )

    def _product(self, inst: TaskInstance) -> Script:
        obs = yield tool_call(
            "query",
            sql=f"SELECT sku, stock FROM products WHERE name = {_sql_text(inst.params['product'])}",
        )
        return csv_rows(obs)[0]

    def solve(self, inst):
        row = yield from self._product(inst)
        new = int(row["stock"]) + inst.params["amount"]
        yield tool_call("update_stock", sku=row["sku"], quantity=new)
        yield final_answer("done")

    def near_miss(self, inst):
        row = yield from self._product(inst)  # sets the stock to the delivery instead of adding
        yield tool_call("update_stock", sku=row["sku"], quantity=inst.params["amount"])
        yield final_answer("done")


class CancelOrder(Task):
    name = "CancelOrder"
    kind = "update"
    description = "Cancel a customer's pending order (its items go back to stock)."

    def sample(self, rng, db):
        rows = _rows(
            db,
            "SELECT c.name, o.id FROM customers c JOIN orders o ON o.customer_id = c.id "
            "WHERE o.status = 'pending' AND (SELECT COUNT(*) FROM orders WHERE customer_id = c.id "
            "AND status = 'pending') = 1 ORDER BY c.id",
        )
        row = rng.choice(rows)
        prompt = (
            f"{row['name']} asked us to cancel their pending order. Cancel it; its items must go "
            "back to stock."
        )
        return TaskInstance(self.name, prompt, {"customer": row["name"], "order_id": row["id"]})

    def apply(self, db, inst):
        order_id = inst.params["order_id"]
        db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (order_id,))
        for product_id, quantity in db.execute(
            "SELECT product_id, quantity FROM order_items WHERE order_id = ?", (order_id,)
        ).fetchall():
            db.execute("UPDATE products SET stock = stock + ? WHERE id = ?", (quantity, product_id))

    def _pending(self, inst: TaskInstance) -> Script:
        obs = yield tool_call(
            "query",
            sql=f"SELECT id FROM customers WHERE name = {_sql_text(inst.params['customer'])}",
        )
        obs = yield tool_call("get_customer", customer_id=int(csv_rows(obs)[0]["id"]))
        return next(o["id"] for o in json.loads(obs)["orders"] if o["status"] == "pending")

    def solve(self, inst):
        order_id = yield from self._pending(inst)
        yield tool_call("update_order_status", order_id=order_id, status="cancelled")
        yield final_answer("done")

    def near_miss(self, inst):
        order_id = yield from self._pending(inst)  # ships it instead
        yield tool_call("update_order_status", order_id=order_id, status="shipped")
        yield final_answer("done")


def _raised(price: int, percent: int) -> int:
    """``price`` raised by ``percent`` %, rounded to the nearest cent (halves up)."""
    return (price * (100 + percent) + 50) // 100


class PriceIncrease(Task):
    name = "PriceIncrease"
    kind = "update"
    description = "Raise every price of a category by p percent."

    def sample(self, rng, db):
        category = rng.choice(
            [r[0] for r in db.execute("SELECT DISTINCT category FROM products ORDER BY 1")]
        )
        percent = rng.choice([5, 10, 15, 20])
        prompt = (
            f"Raise the price of every product in the category {category!r} by {percent}%, "
            "rounding each new price to the nearest cent (halves round up). Prices of orders "
            "already placed must not change."
        )
        return TaskInstance(self.name, prompt, {"category": category, "percent": percent})

    def apply(self, db, inst):
        db.execute(
            "UPDATE products SET price_cents = (price_cents * (100 + ?) + 50) / 100 WHERE category = ?",
            (inst.params["percent"], inst.params["category"]),
        )

    def _products(self, inst: TaskInstance) -> Script:
        obs = yield tool_call(
            "query",
            sql="SELECT sku, price_cents FROM products WHERE category = "
            f"{_sql_text(inst.params['category'])} ORDER BY sku",
        )
        return csv_rows(obs)

    def solve(self, inst):
        for row in (yield from self._products(inst)):
            price = _raised(int(row["price_cents"]), inst.params["percent"])
            yield tool_call("update_price", sku=row["sku"], price_cents=price)
        yield final_answer("done")

    def near_miss(self, inst):
        for row in (yield from self._products(inst))[:-1]:  # forgets the last product
            price = _raised(int(row["price_cents"]), inst.params["percent"])
            yield tool_call("update_price", sku=row["sku"], price_cents=price)
        yield final_answer("done")


class ShipPendingOrders(Task):
    name = "ShipPendingOrders"
    kind = "update"
    description = "Mark every pending order placed on or before a date as shipped."

    def sample(self, rng, db):
        dates = [
            r[0]
            for r in db.execute("SELECT order_date FROM orders WHERE status = 'pending' ORDER BY 1")
        ]
        cutoff = rng.choice(dates[1:] or dates)  # at least two orders (when there are two)
        prompt = (
            f"Mark every pending order placed on or before {cutoff} as shipped. Leave all other "
            "orders as they are."
        )
        return TaskInstance(self.name, prompt, {"cutoff": cutoff})

    def apply(self, db, inst):
        db.execute(
            "UPDATE orders SET status = 'shipped' WHERE status = 'pending' AND order_date <= ?",
            (inst.params["cutoff"],),
        )

    def _ship(self, inst: TaskInstance, op: str) -> Script:
        obs = yield tool_call(
            "query",
            sql=f"SELECT id FROM orders WHERE status = 'pending' AND order_date {op} "
            f"{_sql_text(inst.params['cutoff'])} ORDER BY id",
        )
        for row in csv_rows(obs):
            yield tool_call("update_order_status", order_id=int(row["id"]), status="shipped")
        yield final_answer("done")

    def solve(self, inst):
        yield from self._ship(inst, "<=")

    def near_miss(self, inst):
        yield from self._ship(inst, "<")  # misses the orders placed on the cutoff day


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        CustomerCity(),
        ProductStock(),
        LatestOrderStatus(),
        CheapestInCategory(),
        OrderTotal(),
        CustomerSpend(),
        CategoryRevenue(),
        TopCustomer(),
        LowStockCount(),
        AddCustomer(),
        PlaceOrder(),
        Restock(),
        CancelOrder(),
        PriceIncrease(),
        ShipPendingOrders(),
    )
}
"""Every task, by name (``mcp:<name>-v0``)."""

TASK_NAMES: tuple[str, ...] = tuple(TASKS)
