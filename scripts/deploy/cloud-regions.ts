/**
 * Where the cloud regions a region worker's `placement = { region = "provider:region" }` may name
 * are (https://developers.cloudflare.com/workers/configuration/placement/: AWS, GCP and Azure
 * region identifiers), as coordinates, so the deploy can tell which Durable Object location hint
 * area (src/config/location-hint.ts) each is in and check it against the region's object
 * (scripts/deploy/checks.ts). Approximate city coordinates: the hint areas are continents and
 * halves of them, so a degree either way never changes the answer. A region not listed here is not
 * checked (the deploy says so).
 */

/** [lat, lon] by `provider:region`. */
export const CLOUD_REGION_COORDINATES: Readonly<Record<string, readonly [number, number]>> = {
  "aws:us-east-1": [38.9, -77.4],
  "aws:us-east-2": [40.0, -83.0],
  "aws:us-west-1": [37.4, -122.0],
  "aws:us-west-2": [45.8, -119.7],
  "aws:ca-central-1": [45.5, -73.6],
  "aws:sa-east-1": [-23.5, -46.6],
  "aws:eu-west-1": [53.3, -6.3],
  "aws:eu-west-2": [51.5, -0.1],
  "aws:eu-west-3": [48.9, 2.4],
  "aws:eu-central-1": [50.1, 8.7],
  "aws:eu-central-2": [47.4, 8.5],
  "aws:eu-north-1": [59.3, 18.1],
  "aws:eu-south-1": [45.5, 9.2],
  "aws:ap-northeast-1": [35.7, 139.7],
  "aws:ap-northeast-2": [37.6, 127.0],
  "aws:ap-northeast-3": [34.7, 135.5],
  "aws:ap-southeast-1": [1.35, 103.8],
  "aws:ap-southeast-2": [-33.9, 151.2],
  "aws:ap-south-1": [19.1, 72.9],
  "aws:me-south-1": [26.1, 50.6],
  "aws:af-south-1": [-33.9, 18.4],
  "gcp:us-central1": [41.3, -95.9],
  "gcp:us-east1": [33.2, -80.0],
  "gcp:us-east4": [39.0, -77.5],
  "gcp:us-west1": [45.6, -121.2],
  "gcp:us-west2": [34.0, -118.2],
  "gcp:northamerica-northeast1": [45.5, -73.6],
  "gcp:southamerica-east1": [-23.5, -46.6],
  "gcp:europe-west1": [50.4, 3.8],
  "gcp:europe-west2": [51.5, -0.1],
  "gcp:europe-west3": [50.1, 8.7],
  "gcp:europe-west4": [53.4, 6.8],
  "gcp:europe-north1": [60.6, 27.0],
  "gcp:asia-northeast1": [35.7, 139.7],
  "gcp:asia-southeast1": [1.35, 103.8],
  "gcp:asia-south1": [19.1, 72.9],
  "gcp:australia-southeast1": [-33.9, 151.2],
  "azure:eastus": [37.4, -79.4],
  "azure:eastus2": [36.7, -78.4],
  "azure:centralus": [41.6, -93.6],
  "azure:westus": [37.8, -122.4],
  "azure:westus2": [47.2, -119.9],
  "azure:northeurope": [53.3, -6.3],
  "azure:westeurope": [52.4, 4.9],
  "azure:uksouth": [51.5, -0.1],
  "azure:francecentral": [48.9, 2.4],
  "azure:germanywestcentral": [50.1, 8.7],
  "azure:japaneast": [35.7, 139.7],
  "azure:southeastasia": [1.35, 103.8],
  "azure:australiaeast": [-33.9, 151.2],
  "azure:brazilsouth": [-23.5, -46.6],
};
