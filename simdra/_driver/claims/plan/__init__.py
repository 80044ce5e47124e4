"""What a claim needs on this node (pure): its allocation (`allocation`), the plan
(`prepared`), its CDI spec and env (`cdi`), opaque config (`config`) and device
metadata (`metadata`)."""
