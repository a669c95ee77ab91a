from django.contrib import admin

from handoff.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "kubeconfig", "context", "scenario", "trace", "created")
    search_fields = ("name",)
    # Bulk deletes skip Model.delete(); go through it so Redis forgets the cluster too.
    actions = ["delete_through_model"]

    @admin.action(description="Delete selected clusters")
    def delete_through_model(self, request, queryset) -> None:
        for cluster in queryset:
            cluster.delete()

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
