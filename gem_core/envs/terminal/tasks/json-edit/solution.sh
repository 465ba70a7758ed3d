python3 -c '
import json
c = json.load(open("config.json"))
c["version"] = "2.0.0"
c["features"].append("audit-log")
for s in c["servers"]:
    if s["port"] == 8080:
        s["port"] = 8443
        s["tls"] = True
del c["deprecated"]
json.dump(c, open("config.json", "w"), indent=2)
'
