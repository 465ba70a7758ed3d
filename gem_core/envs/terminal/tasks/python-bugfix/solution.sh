python3 - <<'PY'
src = open("stats.py").read()
old = """    middle = len(values) // 2
    return values[middle]
"""
new = """    values = sorted(values)
    middle = len(values) // 2
    if len(values) % 2 == 0:
        return (values[middle - 1] + values[middle]) / 2
    return values[middle]
"""
open("stats.py", "w").write(src.replace(old, new))
PY
